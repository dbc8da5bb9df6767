package recipes

import "github.com/hashicorp/hcl/v2"

// The block schemas of the recipe language, one per block type. They are
// the single source of truth for what a recipe may contain: unknown names
// are reported by HCL itself, with a "did you mean" when one is close.

var recipeSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "image", LabelNames: []string{"name"}},
	},
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
		{Name: "sensitive"},
		{Name: "legacy_env"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var variableValidationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	},
}

var imageSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "title", Required: true},
		{Name: "version"},
		{Name: "architecture"},
		{Name: "build_marker"},
		{Name: "apt_proxy"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "base"},
		{Type: "layer", LabelNames: []string{"name"}},
		{Type: "kernel"},
		{Type: "netdata"},
		{Type: "bundle", LabelNames: []string{"name"}},
		{Type: "network"},
		{Type: "artifact"},
		{Type: "maas"},
		{Type: "validation"},
		{Type: "waive", LabelNames: []string{"check"}},
	},
}

// DeployChecks names the checks of the deployability check (deploycheck's
// CheckDeployable, imagectl check): what a waive block may name. A test in
// package deploycheck keeps the two in step.
var DeployChecks = []string{
	"compression", "os-release", "kernel", "generic-kernel", "cloud-init", "netplan", "lsb-release",
	"uefi-packages", "boot-efi", "curtin-hooks", "policy-rc.d", "machine-id", "ssh-host-keys",
	"cloud-init-state", "stale-netplan", "grub-commented-default", "grub-dropin-default", "kernel-args",
}

var waiveSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "reason", Required: true}},
}

var baseSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true},
		{Name: "checksum", Required: true},
		{Name: "format"},
		{Name: "size"},
	},
}

// layerContentAttributes and layerContentBlocks are what a layer holds,
// inline or in a layer file.
var layerContentAttributes = []hcl.AttributeSchema{
	{Name: "description"},
	{Name: "enabled"},
	{Name: "packages"},
	{Name: "optional_packages"},
	{Name: "run"},
}

var layerContentBlocks = []hcl.BlockHeaderSchema{
	{Type: "apt_repository", LabelNames: []string{"name"}},
	{Type: "file", LabelNames: []string{"path"}},
	{Type: "services"},
}

// layerBlockSchema is a layer block inside an image: its content inline, or
// a source layer file with the values of that file's variables.
var layerBlockSchema = &hcl.BodySchema{
	Attributes: append([]hcl.AttributeSchema{
		{Name: "source"},
		{Name: "variables"},
		{Name: "install_recommends"},
	}, layerContentAttributes...),
	Blocks: layerContentBlocks,
}

// layerFileSchema is the top level of a reusable layer file under layers/.
var layerFileSchema = &hcl.BodySchema{
	Attributes: layerContentAttributes,
	Blocks: append([]hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
	}, layerContentBlocks...),
}

var aptRepositorySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "uri", Required: true},
		{Name: "suite", Required: true},
		{Name: "components"},
		{Name: "key", Required: true},
		{Name: "enabled"},
	},
}

var fileSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "content"},
		{Name: "source"},
		{Name: "template"},
		{Name: "vars"},
		{Name: "mode"},
		{Name: "owner"},
	},
}

var servicesSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "enable"},
		{Name: "disable"},
	},
}

var kernelSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "args"}},
}

var netdataSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "enabled"},
		{Name: "bind"},
		{Name: "retention_mb"},
		{Name: "update_every"},
		{Name: "collectors"},
	},
}

var bundleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true},
		{Name: "entrypoint", Required: true},
		{Name: "destination"},
		{Name: "checksum"},
	},
}

var networkSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "wait_online_timeout"},
		{Name: "wait_online_any"},
	},
}

var artifactSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "directory"},
		{Name: "compression_level"},
		{Name: "sign_key"},
	},
}

var maasSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "name"},
		{Name: "title"},
		{Name: "filetype"},
		{Name: "base_image", Required: true},
		{Name: "site"},
	},
}

var validationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "script"},
		{Name: "default_profile"},
		{Name: "default_stage"},
		{Name: "collector_wait"},
		{Name: "services_active"},
		{Name: "files_exist"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "check", LabelNames: []string{"name"}},
		{Type: "gpu"},
		{Type: "profile", LabelNames: []string{"name"}},
	},
}

var checkSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "command", Required: true}},
}

var gpuSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "model", Required: true},
		{Name: "count", Required: true},
		{Name: "driver_branch"},
		{Name: "persistence_mode"},
		{Name: "ecc"},
		{Name: "pcie_gen"},
		{Name: "pcie_width"},
		{Name: "nvswitch"},
	},
}

var profileSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "services_active"},
		{Name: "vfio_modules"},
		{Name: "bootstrap"},
		{Name: "bootstrap_env"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "converged"}},
}

var convergedSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "services_active"},
		{Name: "files_exist"},
		{Name: "done_markers"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "fabric"},
		{Type: "bridge"},
		{Type: "dhcp"},
	},
}

var fabricSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "interface", Required: true},
		{Name: "subnet", Required: true},
		{Name: "netplan"},
	},
}

var bridgeSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "name", Required: true},
		{Name: "address", Required: true},
	},
}

var dhcpSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "service"},
		{Name: "subnet_file", Required: true},
	},
}

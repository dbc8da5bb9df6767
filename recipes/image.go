package recipes

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/manifest"
)

// Defaults of the image block.
const (
	DefaultArchitecture      = "amd64/generic"
	DefaultBuildMarker       = "/etc/imagectl/build.json"
	DefaultBundleDir         = "/usr/local/share/gpuaas/site-bootstrap"
	DefaultArtifactDirectory = "artifacts"
	DefaultCompressionLevel  = 6
	DefaultWaitOnlineTimeout = 30 * time.Second
	DefaultNetdataBind       = "127.0.0.1:19999"
	DefaultNetdataRetention  = 256
)

func (l *loader) decodeImage(loadCtx context.Context, block *hcl.Block, ctx *hcl.EvalContext) (*Image, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	img := &Image{Name: block.Labels[0], DeclRange: block.DefRange}
	if err := manifest.CheckImageName(img.Name); err != nil {
		diags = append(diags, hclkit.ErrorAt(block.LabelRanges[0], "Invalid image name", sentence(err)))
	}
	content, a := decodeBody(block.Body, imageSchema, ctx, &diags)
	img.Title = a.nonBlank("title", "Empty title", "The image title is shown in MAAS; give it one.")
	img.Version = a.str("version", "")
	if img.Version != "" {
		if err := manifest.CheckVersion(img.Version); err != nil {
			a.errorAt("version", "Invalid version", sentence(err))
		}
	}
	img.Architecture = a.str("architecture", DefaultArchitecture)
	if !architectureRE.MatchString(img.Architecture) {
		a.errorAt("architecture", "Invalid architecture", fmt.Sprintf("%q is not a MAAS architecture such as %q.", img.Architecture, DefaultArchitecture))
	}
	img.BuildMarker = a.str("build_marker", DefaultBuildMarker)
	if msg := checkImagePath(img.BuildMarker); msg != "" {
		a.errorAt("build_marker", "Invalid build marker path", msg)
	}
	img.AptProxy = a.str("apt_proxy", "")
	if img.AptProxy != "" {
		if msg := checkHTTPURL(img.AptProxy); msg != "" {
			a.errorAt("apt_proxy", "Invalid apt proxy", msg)
		}
	}

	if b := singleBlock(content.Blocks, "base", &diags); b != nil {
		diags = append(diags, l.decodeBase(&img.Base, b, ctx)...)
	} else {
		diags = append(diags, hclkit.ErrorAt(block.DefRange, "Missing base block",
			`An image needs a base { source = ..., checksum = "sha256:..." } block naming the cloud image it starts from.`))
	}

	layerNames, bundleNames := newLabels("Layer", ""), newLabels("Bundle", "")
	for _, b := range content.Blocks {
		switch b.Type {
		case "layer":
			decodeLabeled(&img.Layers, layerNames, b, &diags, func() (*Layer, hcl.Diagnostics) { return l.decodeLayer(loadCtx, b, ctx) })
		case "bundle":
			decodeLabeled(&img.Bundles, bundleNames, b, &diags, func() (*Bundle, hcl.Diagnostics) { return l.decodeBundle(b, ctx) })
		}
	}
	if b := singleBlock(content.Blocks, "kernel", &diags); b != nil {
		diags = append(diags, decodeKernel(&img.Kernel, b, ctx)...)
	}
	if b := singleBlock(content.Blocks, "netdata", &diags); b != nil {
		img.Netdata = &Netdata{}
		diags = append(diags, decodeNetdata(img.Netdata, b, ctx)...)
	}
	if b := singleBlock(content.Blocks, "network", &diags); b != nil {
		img.Network = &Network{}
		diags = append(diags, decodeNetwork(img.Network, b, ctx)...)
	}
	img.Artifact = Artifact{Directory: DefaultArtifactDirectory, CompressionLevel: DefaultCompressionLevel}
	if b := singleBlock(content.Blocks, "artifact", &diags); b != nil {
		diags = append(diags, l.decodeArtifact(&img.Artifact, b, ctx)...)
	}
	if b := singleBlock(content.Blocks, "maas", &diags); b != nil {
		img.MAAS = &MAAS{}
		diags = append(diags, decodeMAAS(img.MAAS, img, b, ctx)...)
	}
	img.Validation.Script = "/usr/local/sbin/" + img.Name + "-validate.sh"
	if b := singleBlock(content.Blocks, "validation", &diags); b != nil {
		diags = append(diags, decodeValidation(&img.Validation, b, ctx)...)
	}
	diags = append(diags, checkBootstraps(img)...)
	waived := newLabels("Waiver", "")
	for _, b := range content.Blocks {
		if b.Type != "waive" {
			continue
		}
		check := b.Labels[0]
		if !slices.Contains(DeployChecks, check) {
			detail := fmt.Sprintf("There is no deployability check named %q; the checks are: %s.", check, strings.Join(DeployChecks, ", "))
			if s := suggest(check, DeployChecks); s != "" {
				detail = fmt.Sprintf("There is no deployability check named %q. Did you mean %q?", check, s)
			}
			diags = append(diags, hclkit.ErrorAt(b.LabelRanges[0], "Unknown deployability check", detail))
			continue
		}
		if !waived.add(b, &diags) {
			continue
		}
		_, a := decodeBody(b.Body, waiveSchema, ctx, &diags)
		reason := a.nonBlank("reason", "Empty reason", "A waiver needs a reason: it is recorded in the manifest for whoever deploys the image.")
		img.Waivers = append(img.Waivers, Waiver{Check: check, Reason: reason})
	}
	return img, diags
}

func (l *loader) decodeBase(base *Base, b *hcl.Block, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	_, a := decodeBody(b.Body, baseSchema, ctx, &diags)
	var userPath bool
	base.Source, userPath = a.path("source")
	switch {
	case !a.ok("source"):
	case strings.Contains(base.Source, "://"):
		if msg := checkHTTPURL(base.Source); msg != "" {
			a.errorAt("source", "Invalid base image URL", msg)
		}
		base.URL = true
	case base.Source == "":
		a.errorAt("source", "Empty base image source", "Give the base image as an http(s) URL or a local path.")
	default:
		// A local base image may live anywhere (a cache, a download
		// directory); only its checksum is trusted. Missing is an error
		// only for a real build, which verifies it first.
		base.Path = located(l.recipeDir, base.Source, userPath)
	}
	base.Checksum = a.str("checksum", "")
	if a.ok("checksum") {
		if msg := checkChecksum(base.Checksum); msg != "" {
			a.errorAt("checksum", "Invalid checksum", msg)
		}
	}
	base.Format = a.str("format", "qcow2")
	if base.Format != "qcow2" && base.Format != "raw" {
		a.errorAt("format", "Unsupported base image format", fmt.Sprintf("%q is not qcow2 or raw.", base.Format))
	}
	base.SizeText = a.str("size", "")
	if base.SizeText != "" {
		size, msg := parseSize(base.SizeText)
		if msg != "" {
			a.errorAt("size", "Invalid size", msg)
		}
		base.Size = size
	}
	return diags
}

func decodeKernel(k *Kernel, b *hcl.Block, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	_, a := decodeBody(b.Body, kernelSchema, ctx, &diags)
	args, ranges := a.strList("args")
	seen := map[string]bool{}
	for i, arg := range args {
		if msg := checkKernelArg(arg); msg != "" {
			diags = append(diags, hclkit.ErrorAt(ranges[i], "Invalid kernel argument", msg))
			continue
		}
		if seen[arg] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Duplicate kernel argument",
				Detail: fmt.Sprintf("%q is given twice.", arg), Subject: ranges[i].Ptr()})
			continue
		}
		seen[arg] = true
		k.Args = append(k.Args, arg)
	}
	return diags
}

func decodeNetdata(n *Netdata, b *hcl.Block, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	_, a := decodeBody(b.Body, netdataSchema, ctx, &diags)
	n.Enabled = a.boolean("enabled", true)
	n.Bind = a.str("bind", DefaultNetdataBind)
	if msg := checkBind(n.Bind); msg != "" {
		a.errorAt("bind", "Invalid bind address", msg)
	}
	n.RetentionMB = a.integer("retention_mb", DefaultNetdataRetention)
	if n.RetentionMB < 16 {
		a.errorAt("retention_mb", "Retention too small", fmt.Sprintf("retention_mb is %d; Netdata's dbengine needs at least 16 MB.", n.RetentionMB))
	}
	n.UpdateEvery = a.integer("update_every", 1)
	if n.UpdateEvery < 1 || n.UpdateEvery > 3600 {
		a.errorAt("update_every", "Invalid update interval", fmt.Sprintf("update_every is %d; give a number of seconds from 1 to 3600.", n.UpdateEvery))
	}
	n.Collectors = a.checkedList("collectors", "Unknown Netdata collector", checkCollector)
	return diags
}

func decodeNetwork(n *Network, b *hcl.Block, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	_, a := decodeBody(b.Body, networkSchema, ctx, &diags)
	n.WaitOnlineTimeout = DefaultWaitOnlineTimeout
	if dur, ok := a.duration("wait_online_timeout"); ok {
		if dur < time.Second || dur > time.Hour {
			a.errorAt("wait_online_timeout", "Invalid timeout", "Give a whole number of seconds from 1s to 1h: systemd-networkd-wait-online takes seconds.")
		} else {
			n.WaitOnlineTimeout = dur
		}
	}
	n.WaitOnlineAny = a.boolean("wait_online_any", true)
	return diags
}

func (l *loader) decodeArtifact(art *Artifact, b *hcl.Block, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	_, a := decodeBody(b.Body, artifactSchema, ctx, &diags)
	if a.has("directory") {
		dir, userPath := a.path("directory")
		if a.ok("directory") {
			art.Directory = dir
			if userPath && strings.TrimSpace(dir) != "" {
				art.Directory = located(l.recipeDir, dir, true)
			}
		}
	}
	if strings.TrimSpace(art.Directory) == "" {
		a.errorAt("directory", "Empty artifact directory", "Give the directory the build writes into.")
	}
	art.CompressionLevel = a.integer("compression_level", art.CompressionLevel)
	if art.CompressionLevel < 1 || art.CompressionLevel > 9 {
		a.errorAt("compression_level", "Invalid compression level", fmt.Sprintf("%d is not a gzip level from 1 (fastest) to 9 (smallest).", art.CompressionLevel))
	}
	key, userPath := a.path("sign_key")
	art.SignKey = key
	if art.SignKey != "" {
		p := located(l.recipeDir, art.SignKey, userPath)
		if userPath {
			// The user's key, relative to where they are: the build
			// reads it from here (signing.BuildKeyPath).
			art.SignKey = p
		}
		if st, err := os.Stat(p); err != nil {
			a.warnAt("sign_key", "Signing key not found", fmt.Sprintf("%s: a build would fail when it signs the artifact.", err))
		} else if !st.Mode().IsRegular() {
			a.errorAt("sign_key", "Not a signing key", fmt.Sprintf("%s is not a regular file: give a cosign private key (cosign.key).", p))
		} else if detail := notSigningKey(p); detail != "" {
			a.errorAt("sign_key", "Not a signing key", detail)
		}
	}
	return diags
}

// notSigningKey says why the file at p is not a cosign private key, or ""
// when it is one. Only the PEM block type is checked: the password is the
// build's to give (package signing decrypts it).
func notSigningKey(p string) string {
	f, err := readlimit.Open(p)
	if err != nil {
		return err.Error() + "."
	}
	defer f.Close()
	head, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return err.Error() + "."
	}
	block, _ := pem.Decode(head)
	switch {
	case block == nil:
		return fmt.Sprintf("%s is not a PEM file: give a cosign private key (cosign.key, from imagectl keygen or cosign generate-key-pair).", p)
	case block.Type == "ENCRYPTED SIGSTORE PRIVATE KEY", block.Type == "ENCRYPTED COSIGN PRIVATE KEY":
		return ""
	case block.Type == "PUBLIC KEY":
		return fmt.Sprintf("%s is a public key: a build signs with the private key (cosign.key); the public key is for imagectl verify.", p)
	default:
		return fmt.Sprintf("%s holds a %q PEM block, not a cosign private key (cosign.key, from imagectl keygen or cosign generate-key-pair).", p, block.Type)
	}
}

// maasFiletypes are the file types MAAS accepts; imagectl builds tgz.
var maasFiletypes = []string{"tgz", "tbz", "txz", "ddtgz", "ddtbz", "ddtxz", "ddtar", "ddbz2", "ddgz", "ddxz", "ddraw"}

func decodeMAAS(m *MAAS, img *Image, b *hcl.Block, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	_, a := decodeBody(b.Body, maasSchema, ctx, &diags)
	m.Name = a.str("name", "custom/"+img.Name)
	short := strings.TrimPrefix(m.Name, "custom/")
	if strings.Contains(short, "/") || !manifest.ValidName(short) {
		a.errorAt("name", "Invalid MAAS name", fmt.Sprintf("%q is not a custom image name: write custom/<name> or <name>, with lowercase letters, digits, '.', '_' and '-'.", m.Name))
	}
	m.Title = a.str("title", img.Title)
	m.Filetype = a.str("filetype", "tgz")
	switch {
	case m.Filetype == "tgz":
	case contains(maasFiletypes, m.Filetype):
		a.errorAt("filetype", "Unsupported MAAS file type",
			fmt.Sprintf("imagectl builds tgz root filesystems (MAAS owns partitioning); %q is a file type MAAS knows but imagectl does not produce.", m.Filetype))
	default:
		a.errorAt("filetype", "Unknown MAAS file type", fmt.Sprintf("%q is not a MAAS file type (%s).", m.Filetype, strings.Join(maasFiletypes, ", ")))
	}
	m.BaseImage = a.str("base_image", "")
	if a.ok("base_image") && !baseImageRE.MatchString(m.BaseImage) {
		a.errorAt("base_image", "Invalid MAAS base image", fmt.Sprintf("%q is not <os>/<series> with os ubuntu, centos, rhel or ol, such as \"ubuntu/noble\".", m.BaseImage))
	}
	m.Site = a.str("site", "")
	if m.Site != "" {
		if msg := checkName("site", m.Site); msg != "" {
			a.errorAt("site", "Invalid site name", msg)
		}
	}
	return diags
}

func (l *loader) decodeBundle(b *hcl.Block, ctx *hcl.EvalContext) (*Bundle, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	bundle := &Bundle{Name: b.Labels[0]}
	if msg := checkName("bundle", bundle.Name); msg != "" {
		diags = append(diags, hclkit.ErrorAt(b.LabelRanges[0], "Invalid bundle name", msg))
	}
	_, a := decodeBody(b.Body, bundleSchema, ctx, &diags)
	src, userPath := a.path("source")
	bundle.Source = src
	if needs := l.unsetIn(a, "source"); len(needs) > 0 {
		bundle.Source = l.written(a, "source")
		bundle.Unresolved = fmt.Sprintf("its source needs %s, which has no value", joinVars(needs))
	} else if a.ok("source") {
		real, err := l.tree.resolve(l.recipeDir, bundle.Source, userPath)
		if err != nil {
			diags = append(diags, sourceDiag("bundle source", a.rng("source"), err))
		} else {
			bundle.Path = real
			st, err := os.Stat(real)
			switch {
			case err != nil:
				diags = append(diags, sourceDiag("bundle source", a.rng("source"), err))
			case st.IsDir():
			case isTarball(real):
				bundle.Archive = true
			default:
				a.errorAt("source", "Invalid bundle source", fmt.Sprintf("%s is neither a directory nor a tarball (.tar, .tar.gz, .tgz).", bundle.Source))
			}
		}
	}
	bundle.Destination = a.str("destination", DefaultBundleDir+"/"+bundle.Name+"/")
	if msg := checkImagePath(bundle.Destination); msg != "" {
		a.errorAt("destination", "Invalid bundle destination", msg)
	}
	if !strings.HasSuffix(bundle.Destination, "/") {
		bundle.Destination += "/"
	}
	bundle.Entrypoint = a.str("entrypoint", "")
	if a.ok("entrypoint") {
		if msg := checkEntrypoint(bundle.Entrypoint); msg != "" {
			a.errorAt("entrypoint", "Invalid bundle entrypoint", msg)
		}
	}
	bundle.Checksum = a.str("checksum", "")
	if a.ok("checksum") {
		if msg := checkChecksum(bundle.Checksum); msg != "" {
			a.errorAt("checksum", "Invalid checksum", msg)
			bundle.Checksum = ""
		}
	}
	if bundle.Path != "" && !diags.HasErrors() {
		diags = append(diags, inspectBundle(bundle, a.rng("checksum"), a.rng("source"))...)
		if bundle.Entrypoint != "" && bundle.Entries != nil {
			if msg := bundle.checkEntrypointEntry(); msg != "" {
				a.errorAt("entrypoint", "Bundle entrypoint missing", msg)
			}
		}
	}
	return bundle, diags
}

func isTarball(p string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Package compile owns the translation of a decoded recipe's image into
// ordered, digested layers of steps (package steps' vocabulary): the
// recipe's own layers, in order, followed by the layers the image block
// implies. It sits below the planner that calls it, beside the step types it
// produces; the reusable layer files it compiles (layers/*.hcl at the root
// of the repository) are data, loaded through package recipes.
//
// The implied layers are "@boot" (kernel args and the networkd wait-online
// bound: how the host boots, rarely changed, and slow to apply since it
// runs update-grub; only when the recipe sets either), "@config" (Netdata,
// bundles: what release engineers change most) and "@finalize" (validation
// script, build marker, clean-up: made from the manifest). The split lets
// the layer cache rebuild a Netdata or bundle change without update-grub.
// Names starting with "@" cannot collide with recipe layer names.
package compile

import (
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/shell"
	"github.com/gpuaas/imagectl/recipes"
)

// Names of the layers the image block implies.
const (
	BootLayer     = "@boot"
	ConfigLayer   = "@config"
	FinalizeLayer = "@finalize"
)

// Layer is a compiled layer: its steps and the digest of its definition and
// inputs (file contents, not paths or mtimes).
type Layer struct {
	Name        string
	Description string
	// File is the layer file relative to the recipe, "" for inline layers.
	File       string
	FileDigest string
	Enabled    bool
	Steps      []steps.Step
	// Digest is empty when the layer is Unresolved: a step of it is an
	// unresolved bundle (a dry run's), whose content is not known.
	Digest     string
	Unresolved bool
	// Key chains the layer's digest with its parent's key (the base
	// image's checksum at the root): equal keys mean equal disk states,
	// which is what the layer cache keys on. An unresolved layer, and
	// every enabled layer after it, has none.
	Key string
}

// Image compiles a recipe's image into its ordered layers, digested and
// keyed. Disabled layers are kept, without steps, digest or key, so plans
// can show them.
func Image(img *recipes.Image) ([]*Layer, error) {
	var out []*Layer
	for _, rl := range img.Layers {
		l := &Layer{Name: rl.Name, Description: rl.Description, File: rl.File, FileDigest: rl.FileDigest, Enabled: rl.Enabled}
		if rl.Enabled {
			l.Steps = layerSteps(rl)
		}
		out = append(out, l)
	}
	boot, err := bootSteps(img)
	if err != nil {
		return nil, err
	}
	if len(boot) > 0 {
		out = append(out, &Layer{Name: BootLayer, Description: "kernel args, network wait-online bound", Enabled: true, Steps: boot})
	}
	out = append(out,
		&Layer{Name: ConfigLayer, Description: "Netdata, bundles", Enabled: true, Steps: configSteps(img)},
		&Layer{Name: FinalizeLayer, Description: "validation script, build marker, clean-up", Enabled: true, Steps: finalizeSteps(img)},
	)
	for _, l := range out {
		if !l.Enabled {
			continue
		}
		if l.Unresolved = unresolved(l.Steps); l.Unresolved {
			continue
		}
		d, err := steps.Digest(l.Steps)
		if err != nil {
			return nil, fmt.Errorf("digesting layer %q: %w", l.Name, err)
		}
		l.Digest = d
	}
	parent := img.Base.Checksum
	for _, l := range out {
		if !l.Enabled {
			continue
		}
		// A key chains what is known: none after an unresolved layer.
		if l.Unresolved {
			parent = ""
		}
		if parent != "" {
			l.Key = chainKey(parent, l.Digest)
		}
		parent = l.Key
	}
	return out, nil
}

// RemovesAptLists reports whether a clean-up of an enabled layer removes
// apt's lists (steps.CleanAptCache; today the finalize layer's default
// clean-up always does): what apt-get update fetched then never reaches
// the image, nor stays on a host that ran the layers at first boot.
func RemovesAptLists(layers []*Layer) bool {
	for _, l := range layers {
		if !l.Enabled {
			continue
		}
		for _, st := range l.Steps {
			if c, ok := st.(steps.Cleanup); ok && slices.Contains(c.Actions, steps.CleanAptCache) {
				return true
			}
		}
	}
	return false
}

func chainKey(parent, layer string) string {
	return digest.Bytes([]byte(parent + "\n" + layer)).String()
}

// unresolved reports whether a step of list is an unresolved bundle.
func unresolved(list []steps.Step) bool {
	for _, s := range list {
		if b, ok := s.(steps.StageBundle); ok && b.Unresolved {
			return true
		}
	}
	return false
}

// layerSteps orders a layer's content: repositories before the packages
// that need them, packages before the files that configure them (so dpkg
// never meets a conffile it did not install), commands after both, services
// last (their units come from packages and files).
func layerSteps(rl *recipes.Layer) []steps.Step {
	var out []steps.Step
	for _, r := range rl.Repositories {
		if r.Enabled {
			out = append(out, aptRepository(r))
		}
	}
	if len(rl.Packages) > 0 {
		out = append(out, steps.Packages{Packages: rl.Packages, NoRecommends: rl.NoRecommends})
	}
	if len(rl.OptionalPackages) > 0 {
		out = append(out, steps.Packages{Packages: rl.OptionalPackages, Optional: true, NoRecommends: rl.NoRecommends})
	}
	for _, f := range rl.Files {
		out = append(out, writeFile(f.Path, f.Mode, f.Owner, f.Origin, f.Content))
	}
	for _, cmd := range rl.Run {
		out = append(out, steps.Run{Command: cmd})
	}
	if len(rl.Services.Enable) > 0 || len(rl.Services.Disable) > 0 {
		out = append(out, steps.Services{Enable: rl.Services.Enable, Disable: rl.Services.Disable})
	}
	return out
}

func writeFile(p string, mode fs.FileMode, owner, origin string, content []byte) steps.WriteFile {
	return steps.WriteFile{Path: p, Mode: mode, Owner: owner, Origin: origin, SHA256: digest.Bytes(content).Hex(), Size: len(content), Content: content}
}

// aptRepository compiles a repository to its keyring and deb822 file.
func aptRepository(r *recipes.AptRepository) steps.AptRepository {
	s := steps.AptRepository{
		Name:        r.Name,
		URI:         r.URI,
		Suite:       r.Suite,
		Components:  r.Components,
		KeyURL:      r.Key.URL,
		KeyringPath: "/etc/apt/keyrings/imagectl-" + r.Name + ".gpg",
		SourcesPath: "/etc/apt/sources.list.d/imagectl-" + r.Name + ".sources",
	}
	if r.Key.Content != nil {
		s.KeyFile, s.KeySHA256, s.KeyContent = r.Key.Display, digest.Bytes(r.Key.Content).Hex(), r.Key.Content
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by imagectl: apt repository %q.\n", r.Name)
	fmt.Fprintf(&b, "Types: deb\nURIs: %s\nSuites: %s\n", r.URI, r.Suite)
	if len(r.Components) > 0 {
		fmt.Fprintf(&b, "Components: %s\n", strings.Join(r.Components, " "))
	}
	fmt.Fprintf(&b, "Signed-By: %s\n", s.KeyringPath)
	s.Sources = b.String()
	return s
}

// Paths of the files the image block compiles to.
const (
	GrubDropIn       = "/etc/default/grub.d/99-imagectl-kernel-args.cfg"
	NetdataConf      = "/etc/netdata/netdata.conf"
	NetdataGoDConf   = "/etc/netdata/go.d.conf"
	WaitOnlineDropIn = "/etc/systemd/system/systemd-networkd-wait-online.service.d/10-imagectl-timeout.conf"
)

func bootSteps(img *recipes.Image) ([]steps.Step, error) {
	var out []steps.Step
	for _, a := range img.Kernel.Args {
		if err := recipes.CheckKernelArg(a); err != nil {
			return nil, fmt.Errorf("kernel argument: %w", err)
		}
	}
	if len(img.Kernel.Args) > 0 {
		out = append(out, steps.KernelArgs{Args: img.Kernel.Args},
			writeFile(GrubDropIn, 0o644, "root:root", "kernel block", []byte(GrubDropInContent(img.Kernel.Args))))
	}
	if n := img.Network; n != nil {
		out = append(out, writeFile(WaitOnlineDropIn, 0o644, "root:root", "network block", []byte(waitOnlineDropIn(n))))
	}
	return out, nil
}

func configSteps(img *recipes.Image) []steps.Step {
	var out []steps.Step
	if n := img.Netdata; n != nil && n.Enabled {
		out = append(out, writeFile(NetdataConf, 0o644, "root:root", "netdata block", []byte(netdataConf(n))))
		if goD := netdataGoD(n); goD != "" {
			out = append(out, writeFile(NetdataGoDConf, 0o644, "root:root", "netdata block", []byte(goD)),
				steps.Run{Command: goDPluginCheck(goDModules(n))})
		}
		out = append(out, steps.Services{Enable: []string{"netdata"}})
	}
	for _, b := range img.Bundles {
		sb := steps.StageBundle{Name: b.Name, Source: b.Source, SourcePath: b.Path, Archive: b.Archive, Destination: b.Destination, Entrypoint: b.Entrypoint, Digest: b.Digest,
			Unresolved: b.Unresolved != "", Reason: b.Unresolved}
		sb.Entries = append(sb.Entries, b.Entries...)
		sort.Slice(sb.Entries, func(i, j int) bool { return sb.Entries[i].Path < sb.Entries[j].Path })
		out = append(out, sb)
	}
	return out
}

func finalizeSteps(img *recipes.Image) []steps.Step {
	return []steps.Step{
		steps.InstallValidationScript{Path: img.Validation.Script},
		steps.WriteBuildMarker{Path: img.BuildMarker},
		steps.Cleanup{Actions: steps.DefaultCleanup},
	}
}

// GrubDropInContent is the grub.d drop-in that carries the kernel args. grub
// sources it after /etc/default/grub; it appends each argument to
// GRUB_CMDLINE_LINUX unless already there, so it never duplicates the edit
// in /etc/default/grub and never touches GRUB_CMDLINE_LINUX_DEFAULT, which
// curtin rewrites at deploy with MAAS's kernel_opts. Each argument is
// single-quoted, so the shell takes it as data whatever it holds; what
// GRUB's linux line can carry is the recipe's rule (recipes.CheckKernelArg),
// which Image holds the args to.
func GrubDropInContent(args []string) string {
	return `# Written by imagectl: the recipe's kernel arguments.
# curtin rewrites GRUB_CMDLINE_LINUX_DEFAULT at deploy and never touches
# GRUB_CMDLINE_LINUX, so the arguments go here and in /etc/default/grub.
for imagectl_arg in ` + shell.Join(args) + `; do
	case " ${GRUB_CMDLINE_LINUX} " in
	*" ${imagectl_arg} "*) ;;
	*) GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+${GRUB_CMDLINE_LINUX} }${imagectl_arg}" ;;
	esac
done
unset imagectl_arg
`
}

func netdataConf(n *recipes.Netdata) string {
	var b strings.Builder
	b.WriteString("# Written by imagectl from the recipe's netdata block.\n")
	fmt.Fprintf(&b, "[db]\n    mode = dbengine\n    update every = %d\n    storage tiers = 1\n    dbengine multihost disk space MB = %d\n\n", n.UpdateEvery, n.RetentionMB)
	fmt.Fprintf(&b, "[web]\n    bind to = %s\n", n.Bind)
	var plugins []string
	for _, c := range n.Collectors {
		if col, _ := recipes.Collector(c); col.Plugin {
			plugins = append(plugins, c)
		}
	}
	if len(plugins) > 0 {
		b.WriteString("\n[plugins]\n")
		for _, p := range plugins {
			fmt.Fprintf(&b, "    %s = yes\n", p)
		}
	}
	return b.String()
}

// goDModules are the collectors that are go.d.plugin modules.
func goDModules(n *recipes.Netdata) []string {
	var mods []string
	for _, c := range n.Collectors {
		if col, _ := recipes.Collector(c); !col.Plugin {
			mods = append(mods, c)
		}
	}
	return mods
}

// goDPluginCheck fails the build when go.d modules are configured but the
// installed Netdata has no go.d.plugin to run them (Debian's and Ubuntu's
// netdata packages do not ship it): a config that collects nothing must not
// ship.
func goDPluginCheck(mods []string) string {
	return `for p in /usr/libexec/netdata/plugins.d/go.d.plugin /usr/lib/netdata/plugins.d/go.d.plugin; do [ -x "$p" ] && exit 0; done; ` +
		`echo "the netdata block configures the go.d modules "` + shell.Quote(strings.Join(mods, ", ")) + `", but the installed Netdata has no go.d.plugin ` +
		`(the distribution's netdata package does not ship it): install Netdata from its own repository ` +
		`(layers/netdata.hcl with repository = \"netdata\"), or drop these collectors" >&2; exit 1`
}

// netdataGoD enables the go.d modules among the collectors ("" if none).
func netdataGoD(n *recipes.Netdata) string {
	mods := goDModules(n)
	if len(mods) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Written by imagectl from the recipe's netdata block.\nenabled: yes\ndefault_run: yes\nmodules:\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "  %s: yes\n", m)
	}
	return b.String()
}

func waitOnlineDropIn(n *recipes.Network) string {
	args := fmt.Sprintf("--timeout=%d", int(n.WaitOnlineTimeout.Seconds()))
	if n.WaitOnlineAny {
		args += " --any"
	}
	return "# Written by imagectl: first boot must not wait forever on unused fabric ports.\n" +
		"[Service]\nExecStart=\nExecStart=/usr/lib/systemd/systemd-networkd-wait-online " + args + "\n"
}

package apply

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/shell"
)

// The build-time settings: dpkg in the appliance without a sync per file
// it writes (force-unsafe-io). The appliance's disk is thrown away unless
// the build finishes, and it is flushed as a whole before each layer
// snapshot (Checkpoint) and before packing (the session's close), so the
// per-file syncs only cost time. The setting changes how dpkg writes,
// never what: it lives in a dpkg.cfg.d file written before the first layer
// that may run dpkg (RunsDpkg) and removed before a layer's snapshot and
// before packing, so neither a cached layer nor the image carries it, and
// the directory keeps its modification time. Each write and removal is a
// guest command (seconds under TCG): a build without the layer cache makes
// one of each.
const (
	dpkgCfgDir     = "/etc/dpkg/dpkg.cfg.d"
	dpkgBuildFile  = "zz-imagectl-build"
	dpkgBuildLines = "# imagectl: for the build only, removed before packing\nforce-unsafe-io\n"
)

var dpkgBuildConfig = path.Join(dpkgCfgDir, dpkgBuildFile)

// buildSettings is what StartBuildSettings found and wrote: the directory's
// modification time before and after the file was written.
type buildSettings struct {
	before, after string
}

// StartBuildSettings writes the build-time settings into the guest, unless
// a.KeepDpkgSyncs is set or the guest has no dpkg configuration directory.
// EndBuildSettings removes them.
func (a *Applier) StartBuildSettings(ctx context.Context) error {
	if a.KeepDpkgSyncs || a.settings != nil {
		return nil
	}
	out, err := a.Session.Run(ctx, startSettingsScript(dpkgCfgDir))
	if err != nil {
		return fmt.Errorf("writing the build-time dpkg settings (%s): %w", dpkgBuildConfig, err)
	}
	f := strings.Fields(out)
	switch len(f) {
	case 0: // no dpkg.cfg.d: nothing written
		return nil
	case 2:
		a.settings = &buildSettings{before: f[0], after: f[1]}
		return nil
	}
	return fmt.Errorf("writing the build-time dpkg settings (%s): unexpected output %q", dpkgBuildConfig, out)
}

// EndBuildSettings removes what StartBuildSettings wrote and gives the
// directory back its modification time, unless something else changed it
// in between (a package's own file there: its time then stays).
func (a *Applier) EndBuildSettings(ctx context.Context) error {
	if a.settings == nil {
		return nil
	}
	if _, err := a.Session.Run(ctx, endSettingsScript(dpkgCfgDir, *a.settings)); err != nil {
		return fmt.Errorf("removing the build-time dpkg settings (%s): %w", dpkgBuildConfig, err)
	}
	a.settings = nil
	return nil
}

// startSettingsScript writes the file and prints the directory's
// modification time before and after, or nothing without the directory.
func startSettingsScript(dir string) string {
	return "set -e\nd=" + shell.Quote(dir) + "\n" +
		"[ -d \"$d\" ] || exit 0\n" +
		"before=$(date -r \"$d\" +%s.%N)\n" +
		"printf '%s' " + shell.Quote(dpkgBuildLines) + " > \"$d\"/" + shell.Quote(dpkgBuildFile) + "\n" +
		"echo \"$before $(date -r \"$d\" +%s.%N)\"\n"
}

// endSettingsScript removes the file and restores the directory's time
// when its time is still the one the file's writing left.
func endSettingsScript(dir string, s buildSettings) string {
	return "set -e\nd=" + shell.Quote(dir) + "\n" +
		"now=$(date -r \"$d\" +%s.%N)\n" +
		"rm -f \"$d\"/" + shell.Quote(dpkgBuildFile) + "\n" +
		"if [ \"$now\" = " + shell.Quote(s.after) + " ]; then touch -m -d @" + shell.Quote(s.before) + " \"$d\"; fi\n"
}

// RunsDpkg says whether a layer's steps may run dpkg: packages steps and
// commands.
func RunsDpkg(sts []steps.Step) bool {
	for _, st := range sts {
		switch st.(type) {
		case steps.Packages, steps.Run:
			return true
		}
	}
	return false
}

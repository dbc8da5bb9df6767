package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
)

// The helpers every command shares for its arguments and its output.
//
// Libraries' errors may name a flag or a variable of this CLI (--version,
// --catalog, $IMAGECTL_CATALOG, --registry-ca, --keep, --base-image,
// --root, keygen's --force) where that is what the user must change: they
// are written for imagectl's users, and this is the one place that says so.

// outputFlag is --output (-o): text, the default, or json, or another
// format a command lists (diff's markdown).
type outputFlag struct {
	format string
	// formats are the values it takes, text first: text and json when nil.
	formats []string
	// note follows the help text, in parentheses.
	note string
}

func (o *outputFlag) list() []string {
	if o.formats == nil {
		return []string{"text", "json"}
	}
	return o.formats
}

// register adds the flag to cmd.
func (o *outputFlag) register(cmd *cobra.Command) { o.registerIn(cmd, cmd.Flags()) }

// registerIn adds the flag to one of cmd's flag sets (its persistent flags,
// which its subcommands share).
func (o *outputFlag) registerIn(cmd *cobra.Command, flags *pflag.FlagSet) {
	help := "output format: " + orList(o.list())
	if o.note != "" {
		help += " (" + o.note + ")"
	}
	flags.StringVarP(&o.format, "output", "o", "text", help)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(o.list(), cobra.ShellCompDirectiveNoFileComp))
}

// check refuses a format the command does not print.
func (o *outputFlag) check() error {
	if !slices.Contains(o.list(), o.format) {
		return fmt.Errorf("--output must be %s, not %q", orList(o.list()), o.format)
	}
	return nil
}

// json is whether the output is JSON.
func (o *outputFlag) json() bool { return o.format == "json" }

// print writes v to w as indented JSON with --output json, else what text
// writes.
func (o *outputFlag) print(w io.Writer, v any, text func(io.Writer) error) error {
	if o.json() {
		return writeJSON(w, v)
	}
	return text(w)
}

// runE is cobra's RunE for a command's runX: run with the command's
// context, its flags f, arguments, streams and env.
func runE[F any](f *F, env []string, run func(ctx context.Context, f *F, args []string, s streams, env []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), f, args, streamsOf(cmd), env) }
}

// command makes c run run with a new flags struct, and returns both: the
// caller registers the flags on c.
func command[F any](env []string, run func(ctx context.Context, f *F, args []string, s streams, env []string) error, c *cobra.Command) (*cobra.Command, *F) {
	f := new(F)
	c.RunE = runE(f, env, run)
	return c, f
}

// streamsOf are the streams a command writes to.
func streamsOf(cmd *cobra.Command) streams {
	return streams{in: cmd.InOrStdin(), out: cmd.OutOrStdout(), err: cmd.ErrOrStderr()}
}

// failWith says err on w as run does and ends the command with status
// code: for the commands whose status says more than failed or not (diff's
// 2, smoke's 1 for a failed validation).
func failWith(w io.Writer, code int, err error) error {
	fmt.Fprintf(w, "imagectl: %s\n", errorText(err.Error()))
	return exitError{code}
}

// orList is "a or b", "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// fromStore is whether a command's arguments are IMAGE VERSION from the
// store (two) rather than ARTIFACT.tgz (one). Given IMAGE VERSION, it
// refuses the flags that apply to a tgz alone (tgzOnly, named in the
// error) when any of them is set.
func fromStore(args []string, tgzOnlySet bool, tgzOnly ...string) (bool, error) {
	if len(args) != 2 {
		return false, nil
	}
	if tgzOnlySet {
		verb := "applies"
		if len(tgzOnly) > 1 {
			verb = "apply"
		}
		return true, fmt.Errorf("%s %s to a tgz, not to a version from the store", strings.Join(tgzOnly, " and "), verb)
	}
	return true, nil
}

// manifestBeside is --manifest, else the manifest beside tgz.
func manifestBeside(tgz, flag string) string {
	if flag != "" {
		return flag
	}
	return manifest.FilesBeside(tgz).Manifest
}

// artifact resolves ARTIFACT.tgz | IMAGE VERSION to a local tgz and its
// manifest (manifestPath, --manifest, applies to a tgz alone, "" for the
// one beside it): given IMAGE VERSION, the version's, its tgz fetched from
// a registry into the cache, verified. v is the version, nil for a tgz.
func (f *storeFlags) artifact(ctx context.Context, env, args []string, manifestPath string) (tgz, manifest string, v *store.Version, err error) {
	versioned, err := fromStore(args, manifestPath != "", "--manifest")
	if err != nil || !versioned {
		return args[0], manifestPath, nil, err
	}
	if v, err = f.version(ctx, env, args[0], args[1], true); err != nil {
		return "", "", nil, err
	}
	return v.Tarball, v.Manifest, v, nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/internal/textsafe"
)

type streams struct {
	in       io.Reader
	out, err io.Writer
}

// exitError carries an exit status for outcomes that are not failures of
// imagectl itself (a recipe with errors, an unformatted file); the command
// has already said why.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run executes imagectl with args and returns the process exit status:
// exitInterrupted when ctx was cancelled (a signal, see interruptContext)
// and the command stopped for it. Whatever a command prints goes through
// redact.Writer, which replaces every secret the process has read (a key,
// a token, a password, a sensitive variable), and the final error through
// redact.Text, which also strips the credentials of any URL in it.
func run(ctx context.Context, args []string, s streams, env []string) int {
	out, errw := redact.NewWriter(s.out), redact.NewWriter(s.err)
	defer errw.Flush()
	defer out.Flush()
	s = streams{in: s.in, out: out, err: errw}
	root := newRootCmd(s, env)
	root.SetArgs(normalizeArgs(args))
	err := root.ExecuteContext(ctx)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		// Interrupted: whatever the command says, say why it stopped.
		msg, cause := err.Error(), context.Cause(ctx).Error()
		switch {
		case errors.As(err, &ee) || msg == context.Canceled.Error():
			msg = cause
		case !strings.Contains(msg, cause):
			msg += " (" + cause + ")"
		}
		fmt.Fprintf(s.err, "imagectl: %s\n", errorText(msg))
		return exitInterrupted
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(s.err, "imagectl: %s\n", errorText(err.Error()))
		return 1
	}
}

// errorText is an error's message for the terminal: whatever it carries from
// input (a server's answer, an entry name, a path), no control character
// reaches the terminal but the newlines and tabs that lay out its lines.
// Values that could hold a newline of their own are escaped where they
// enter the message. No secret is shown (redact.Text).
func errorText(msg string) string { return textsafe.Escape(redact.Text(msg), "\n\t") }

func newRootCmd(s streams, env []string) *cobra.Command {
	root := &cobra.Command{
		Use:   "imagectl",
		Short: "Build curated MAAS host images from HCL recipes",
		Long: `imagectl builds curated MAAS host images from declarative HCL recipes:
a base cloud image, package layers, kernel args, Netdata and site-bootstrap
bundles, customized through libguestfs into a tgz root filesystem that MAAS
deploys, with a build manifest and a signature.`,
		Example: `  imagectl build recipes/h200.hcl --dry-run
  export IMAGECTL_VAR_site_bootstrap_dir=/srv/infra/env/maas/site-bootstrap
  imagectl validate recipes/h200.hcl
  imagectl build recipes/h200.hcl --dry-run -var enable_doca_repos=true --output json
  imagectl fmt --check recipes layers
  imagectl diff old.manifest.json new.manifest.json`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.AddCommand(
		newBuildCmd(env),
		newCacheCmd(env),
		newValidateCmd(env),
		newFmtCmd(),
		newDiffCmd(env),
		newCheckCmd(env),
		newUploadCmd(env),
		newImagesCmd(env), newShowCmd(env), newPublishCmd(env),
		newPromoteCmd(env), newRollbackCmd(env), newStatusCmd(env), newHistoryCmd(env), newGCCmd(env),
		newRevokeCmd(env), newPredeployCmd(env),
		newWarmRacksCmd(env),
		newSmokeCmd(env),
		newHostcheckCmd(env), newEvidenceCmd(env),
		newValidateScriptCmd(env),
		newFirstbootCmd(env),
		newKeygenCmd(env), newSignCmd(env), newVerifyCmd(),
		newVersionCmd(),
	)
	return root
}

// normalizeArgs accepts Packer's single-dash spellings (-var, -var-file,
// -check, -output) beside the double-dash ones pflag understands.
func normalizeArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "-var", "-var-file", "-check", "-output", "-version", "-root", "-diff":
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

// isTerminal reports whether w is a terminal that wants colour.
func isTerminal(w io.Writer, env []string) bool {
	if _, noColor := environ.Lookup(env, "NO_COLOR"); noColor || environ.Get(env, "TERM") == "dumb" {
		return false
	}
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

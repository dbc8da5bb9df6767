package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
)

type revokeFlags struct {
	list      listFlags
	sitesFile string
	reason    string
	by        string
	undo      bool
}

// The undo is a flag of revoke, not a command of its own: it is recorded
// in the same revocation history, takes the same arguments and a reason
// too, and one --help shows both.
func newRevokeCmd(env []string) *cobra.Command {
	cmd, f := command(env, runRevoke, &cobra.Command{
		Use:   "revoke IMAGE VERSION --reason WHY [--undo]",
		Short: "Record that an image version must not run at any site (or, --undo, that it may again)",
		Long: `Revoke records in the store's catalog, for every site, that a version must
not run, with who (--by, default $USER), when and why (--reason, required).
The version must be in the store. From then on promote and rollouts refuse
it, naming the revocation; rollback skips it to the version before it;
status exits 1 at every site that runs it or whose deploy profile selects
it; predeploy fails there; images and show mark it; gc deletes it first.
When the store has channels (an OCI store's IMAGE:site-SITE tags), the
channel of every site of the sites file that points at it is pointed at
the version a rollback of the site returns to: a channel never points at
a revoked version. Revoking what is revoked records nothing.

--undo records that the version may run again (and points those channels
back at it where the site still runs it). Nothing is rolled forward: a
site rolled back stays where it is until promoted.`,
		Example: `  imagectl revoke gpuaas-h200-host-ubuntu2404 1.4.0 --reason "NCCL hangs on 8-GPU jobs (INC-4312)"
  imagectl revoke --undo gpuaas-h200-host-ubuntu2404 1.4.0 --reason "INC-4312 was the switch firmware"`,
		Args: cobra.ExactArgs(2),
	})
	f.list.register(cmd)
	cmd.Flags().StringVar(&f.sitesFile, "sites", "", "the sites file whose sites' channels are checked, when the store has channels (default: $IMAGECTL_SITES, else ./sites.hcl when present)")
	cmd.Flags().StringVar(&f.reason, "reason", "", "why the version must not run (or may again): every refusal shows it")
	cmd.Flags().StringVar(&f.by, "by", "", "who revokes, for the record (default: $USER)")
	cmd.Flags().BoolVar(&f.undo, "undo", false, "record that the version may run again")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func runRevoke(ctx context.Context, f *revokeFlags, args []string, s streams, env []string) error {
	st, err := f.list.open(ctx, env)
	if err != nil {
		return err
	}
	o := release.RevokeOptions{Reason: f.reason, By: f.by, Env: env, Undo: f.undo}
	if _, ok := store.ChannelsOf(st); ok {
		if o.Sites, err = f.siteNames(s, env); err != nil {
			return err
		}
	}
	res, err := release.Revoke(ctx, st, args[0], args[1], o)
	if err != nil {
		return err
	}
	return f.list.output.print(s.out, res, func(w io.Writer) error { revokeText(w, res, f.undo); return nil })
}

// siteNames are the sites of the sites file, none when no file is named
// and the default one is absent.
func (f *revokeFlags) siteNames(s streams, env []string) ([]string, error) {
	path := sites.FilePath(f.sitesFile, env)
	if f.sitesFile == "" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	sf := siteFlags{sitesFile: path}
	ss, _, err := sf.file(s, env)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, site := range ss.Sites {
		out = append(out, site.Name)
	}
	return out, nil
}

func revokeText(w io.Writer, res *release.RevokeResult, undo bool) {
	r := res.Revocation
	switch {
	case res.Unchanged && undo:
		textsafe.Fprintf(w, "%s %s is not revoked: nothing recorded\n", res.Image, res.Version)
	case res.Unchanged:
		textsafe.Fprintf(w, "%s %s is already revoked, by %s at %s: %s (nothing recorded)\n", res.Image, res.Version, r.By, r.At.Format(time.RFC3339), r.Reason)
	case undo:
		textsafe.Fprintf(w, "%s %s may run again (by %s at %s: %s); promote it where it should\n", res.Image, res.Version, r.By, r.At.Format(time.RFC3339), r.Reason)
	default:
		textsafe.Fprintf(w, "revoked %s %s at every site (by %s at %s: %s)\n", res.Image, res.Version, r.By, r.At.Format(time.RFC3339), r.Reason)
		textsafe.Fprintf(w, "imagectl status --site SITE exits 1 where it runs; imagectl rollback %s --site SITE returns such a site to the version before\n", res.Image)
	}
	for _, c := range res.Channels {
		textsafe.Fprintf(w, "channel of site %s: %s -> %s\n", c.Site, dash(c.From), c.To)
	}
	for _, warn := range res.Warnings {
		textsafe.Fprintf(w, "warning: %s\n", warn)
	}
}

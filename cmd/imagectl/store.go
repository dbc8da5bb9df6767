package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storeopen"
)

// storeFlags say where image versions and promotions are kept.
type storeFlags struct {
	// store is --store: a directory or oci://REGISTRY/PREFIX.
	store string
	// catalog is --catalog: the git remote of the promotion catalog.
	catalog string
	// registryCA and plainHTTP are how the registry is reached.
	registryCA string
	plainHTTP  bool
}

func (f *storeFlags) register(cmd *cobra.Command) {
	f.registerVersions(cmd, "the image store: a directory or "+storeopen.Scheme+"REGISTRY/PREFIX (default: $IMAGECTL_STORE, else ./"+store.DefaultDir+")")
	cmd.Flags().StringVar(&f.catalog, "catalog", "", "the git remote holding the promotion catalog (default: $IMAGECTL_CATALOG, else a directory store's own)")
}

// registerVersions registers the flags of the version store alone.
func (f *storeFlags) registerVersions(cmd *cobra.Command, storeHelp string) {
	cmd.Flags().StringVar(&f.store, "store", "", storeHelp)
	cmd.Flags().StringVar(&f.registryCA, "registry-ca", "", "a PEM CA bundle the registry's certificate is checked against, besides the system's (default: $IMAGECTL_REGISTRY_CA)")
	cmd.Flags().BoolVar(&f.plainHTTP, "plain-http", false, "talk to the registry over plain HTTP (loopback registries only)")
}

// options are the store the flags name, with what they leave to the
// environment filled in (storeopen.Resolve).
func (f *storeFlags) options(env []string) storeopen.Options {
	return storeopen.Resolve(storeopen.Options{Store: f.store, Catalog: f.catalog, CAFile: f.registryCA, PlainHTTP: f.plainHTTP, Env: env})
}

// open opens the store the flags name; signer, when set, signs what is
// published to a registry.
func (f *storeFlags) open(ctx context.Context, env []string, signer ...*signing.Signer) (store.Store, error) {
	o := f.options(env)
	if len(signer) > 0 {
		o.Signer = signer[0]
	}
	return storeopen.Open(ctx, o)
}

// catalogOf is where st keeps revocations and boot comparisons: its
// catalog, or nil for a registry store without one (images and show list
// versions without it).
func (f *storeFlags) catalogOf(st store.Store, env []string) store.Promotions {
	if o := f.options(env); storeopen.IsRegistry(o.Store) && o.Catalog == "" {
		return nil
	}
	return st
}

// listFlags are the flags of the commands that read the store alone.
type listFlags struct {
	store  storeFlags
	output outputFlag
}

func (f *listFlags) register(cmd *cobra.Command) {
	f.store.register(cmd)
	f.output.register(cmd)
}

// open checks --output and opens the store.
func (f *listFlags) open(ctx context.Context, env []string) (store.Store, error) {
	if err := f.output.check(); err != nil {
		return nil, err
	}
	return f.store.open(ctx, env)
}

func newImagesCmd(env []string) *cobra.Command {
	cmd, f := command(env, runImages, &cobra.Command{
		Use:   "images",
		Short: "List the images and versions in the store",
		Long: `Images lists every image and version in the store, oldest first, with
when each was published, its size, sha256, whether it is signed, and
whether it is revoked (imagectl revoke): REVOKED names who revoked it, and
--output json gives the revocation as the version's "revoked".`,
		Args: cobra.NoArgs,
	})
	f.register(cmd)
	return cmd
}

func runImages(ctx context.Context, f *listFlags, _ []string, s streams, env []string) error {
	st, err := f.open(ctx, env)
	if err != nil {
		return err
	}
	imgs, err := release.Images(ctx, st, f.store.catalogOf(st, env))
	if err != nil {
		return err
	}
	return f.output.print(s.out, imgs, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "IMAGE\tVERSION\tPUBLISHED\tSIZE\tSHA256\tSIGNED\tREVOKED")
		for _, img := range imgs {
			for _, v := range img.Versions {
				revoked := "-"
				if r := v.Revoked; r != nil {
					revoked = "by " + r.By + " at " + r.At.Format(time.RFC3339)
				}
				textsafe.Fprintf(tw, "%s\t%s\t%s\t%d\t%.12s\t%s\t%s\n", img.Name, v.Version.Version, v.Published.Format(time.RFC3339), v.Size, v.SHA256, yesNo(v.Signed()), revoked)
			}
		}
		return tw.Flush()
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newShowCmd(env []string) *cobra.Command {
	cmd, f := command(env, runShow, &cobra.Command{
		Use:   "show IMAGE VERSION",
		Short: "Show one image version in the store: files, hashes, MAAS target, lineage, revocation",
		Long: `Show prints one image version of the store: its title, files and hashes,
MAAS target, lineage, deployability findings, its revocation when it is
revoked, and, when boot comparisons are recorded with it ("imagectl
evidence add-comparison"), one line per profile, stage, accelerator and
memory: "validated in X s baked vs Y s at first boot (deploy A s vs B s),
RATIO (ACCELERATOR, MEMORY MiB, PROFILE/STAGE, measured WHEN)", or the
path that failed and why, and "; not like for like: ..." when the
first-boot path did not do the same work. --output json gives them as
"boot_comparisons" (with "like_for_like" and "summary", that line).
Comparisons that cannot be read are a warning line ("boot_comparisons_error"
in JSON): the version and its revocation are still shown.`,
		Args: cobra.ExactArgs(2),
	})
	f.register(cmd)
	return cmd
}

func runShow(ctx context.Context, f *listFlags, args []string, s streams, env []string) error {
	// One fetch of a git catalog for the revocation and the comparisons.
	ctx = store.OneView(ctx)
	st, err := f.open(ctx, env)
	if err != nil {
		return err
	}
	v, err := st.Version(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	m, err := manifest.Read(v.Manifest)
	if err != nil {
		return err
	}
	r, err := release.Revocation(ctx, f.store.catalogOf(st, env), args[0], args[1])
	if err != nil {
		return err
	}
	// Comparisons that cannot be read (a file edited by hand, of a newer
	// imagectl) are a warning: the version and its revocation still show.
	cs, csErr := release.BootComparisons(ctx, f.store.catalogOf(st, env), args[0], args[1])
	j := map[string]any{"version": v, "maas": m.MAAS, "lineage": m.Lineage,
		"deploy_findings": m.Deploy, "title": m.Image.Title, "architecture": m.Image.Architecture, "revoked": r}
	if len(cs) > 0 {
		// Only when recorded: show's output without one is as it was.
		j["boot_comparisons"] = comparisonsJSON(cs)
	}
	if csErr != nil {
		j["boot_comparisons_error"] = csErr.Error()
	}
	return f.output.print(s.out, j, func(w io.Writer) error { return showText(w, v, m, r, cs, csErr) })
}

func showText(w io.Writer, v *store.Version, m *manifest.Manifest, r *store.Revocation, cs []store.BootComparison, csErr error) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	textsafe.Fprintf(w, "%s %s: %s\n", v.Image, v.Version, m.Image.Title)
	if r != nil {
		textsafe.Fprintf(w, "  REVOKED by %s at %s: %s (no site may run it: imagectl revoke --undo allows it again)\n", r.By, r.At.Format(time.RFC3339), r.Reason)
	}
	for i := range cs {
		comparisonText(w, "  ", &cs[i])
	}
	if csErr != nil {
		textsafe.Fprintf(w, "  WARNING: its boot comparisons cannot be read: %s\n", csErr)
	}
	textsafe.Fprintf(tw, "  published\t%s\n", v.Published.Format(time.RFC3339))
	textsafe.Fprintf(tw, "  tgz\t%d bytes, sha256 %s\n", v.Size, v.SHA256)
	textsafe.Fprintf(tw, "  signed\t%s\n", yesNo(v.Signed()))
	if t := m.MAAS; t != nil {
		textsafe.Fprintf(tw, "  maas\t%s as %s (distro_series %s, base %s)\n", t.Name, t.VersionedName, t.DistroSeries, t.BaseImage)
	}
	if p := m.Lineage.ParentVersion; p != "" {
		textsafe.Fprintf(tw, "  parent\t%s\n", p)
	}
	if r := m.Lineage.SourceRevision; r != "" {
		textsafe.Fprintf(tw, "  source\t%s\n", r)
	}
	errs := len(m.DeployErrors())
	textsafe.Fprintf(tw, "  deployability\t%d findings, %d blocking\n", len(m.Deploy), errs)
	textsafe.Fprintf(tw, "  directory\t%s\n", v.Dir)
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range v.Files {
		textsafe.Fprintf(tw, "    %s\t%s\t%d\t%.12s\n", f.Name, f.Role, f.Size, f.SHA256)
	}
	return tw.Flush()
}

// startStoreBuild starts build's side of the store (release.StartBuild):
// nil, no store, when neither --store nor $IMAGECTL_STORE is set. signer,
// when set, signs what is published to a registry.
func startStoreBuild(ctx context.Context, sf *storeFlags, env []string, signer *signing.Signer, o release.BuildOptions) (*release.Build, error) {
	if !storeopen.Configured(sf.store, env) {
		return nil, nil
	}
	st, err := sf.open(ctx, env, signer)
	if err != nil {
		return nil, err
	}
	return release.StartBuild(ctx, st, o)
}

// publishBuild publishes a build's outputs into the store (none without
// one), points res at the published files and returns the signatures'
// paths and the version's registry reference ("" for none).
func publishBuild(ctx context.Context, sb *release.Build, res *builder.Result, log io.Writer) (sigs []string, ref string, err error) {
	p, err := sb.Publish(ctx, res.Files, append([]string{}, res.Signatures...))
	if err != nil {
		return nil, "", err
	}
	res.Files = p.Files
	if v := p.Version; v != nil {
		ref = v.Ref
		textsafe.Fprintf(log, "published %s %s in the store %s\n", v.Image, v.Version, sb.Location())
	}
	return p.Signatures, ref, nil
}

// version looks IMAGE VERSION up in the store; with tarball, its tgz is made
// a local file too (fetched, verified, into the cache from a registry).
func (f *storeFlags) version(ctx context.Context, env []string, image, version string, tarball bool) (*store.Version, error) {
	st, err := f.open(ctx, env)
	if err != nil {
		return nil, err
	}
	v, err := st.Version(ctx, image, version)
	if err != nil {
		return nil, err
	}
	if tarball {
		if _, err := v.LocalTarball(ctx); err != nil {
			return nil, err
		}
	}
	return v, nil
}

type publishFlags struct {
	store            storeFlags
	manifest, script string
	signKey          string
	output           outputFlag
}

func newPublishCmd(env []string) *cobra.Command {
	cmd, f := command(env, runPublish, &cobra.Command{
		Use:   "publish ARTIFACT.tgz",
		Short: "Publish a built tgz, its manifest, validation script and signatures into a store",
		Long: `Publish puts an artifact built elsewhere (or with --output-dir) into an image
store as the version its manifest names, immutable: the same bytes again is a
no-op, other bytes under that version are refused. The signatures beside the
tgz and the manifest (.sig, .sigstore.json) go with them. Into a registry
store (oci://REGISTRY/PREFIX) it pushes one OCI manifest per version, and
with --sign-key signs it in cosign's format, so that
cosign verify --key cosign.pub REGISTRY/PREFIX/IMAGE:VERSION accepts it.`,
		Example: `  imagectl publish artifacts/gpuaas-h200-host-ubuntu2404-1.4.0.tgz --store oci://registry.example.com/imagectl --sign-key cosign.key
  imagectl publish out/x-20261123.1.tgz --store /srv/imagectl-store`,
		Args: cobra.ExactArgs(1),
	})
	f.store.registerVersions(cmd, "the image store to publish into: a directory or "+storeopen.Scheme+"REGISTRY/PREFIX (default: $IMAGECTL_STORE, else ./"+store.DefaultDir+")")
	cmd.Flags().StringVar(&f.manifest, "manifest", "", "the build manifest (default: the .manifest.json beside the tgz)")
	cmd.Flags().StringVar(&f.script, "validation-script", "", "the validation script (default: the -validate.sh beside the tgz, when there is one)")
	cmd.Flags().StringVar(&f.signKey, "sign-key", "", "sign the registry's OCI manifest with this cosign private key (password from $COSIGN_PASSWORD)")
	f.output.register(cmd)
	return cmd
}

func runPublish(ctx context.Context, f *publishFlags, args []string, s streams, env []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	var signer *signing.Signer
	if f.signKey != "" {
		if loc := storeopen.Location(f.store.store, env); !storeopen.IsRegistry(loc) {
			return fmt.Errorf("--sign-key signs a registry's OCI manifest; the directory store %s keeps the signatures beside the tgz: sign the artifact with imagectl sign --key, then publish it", loc)
		}
		var err error
		if signer, err = loadSigner(f.signKey, env); err != nil {
			return err
		}
	}
	st, err := f.store.open(ctx, env, signer)
	if err != nil {
		return err
	}
	v, err := st.Publish(ctx, manifest.Files{Tarball: args[0], Manifest: manifestBeside(args[0], f.manifest), ValidationScript: f.script}, store.PublishOptions{})
	if err != nil {
		return err
	}
	return f.output.print(s.out, v, func(w io.Writer) error {
		verb := "published"
		if v.Existed {
			verb = "already published (same content)"
		}
		where := cmp.Or(v.Ref, st.Location())
		_, err := textsafe.Fprintf(w, "%s %s %s: %s\n  sha256 %s, %d bytes, signed: %s\n", verb, v.Image, v.Version, where, v.SHA256, v.Size, yesNo(v.Signed()))
		return err
	})
}

package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
	"github.com/gpuaas/imagectl/store"
)

// storeDir is --store, else $IMAGECTL_STORE, else ./imagectl-store.
func storeDir(flag string, env []string) string {
	if flag != "" {
		return flag
	}
	if v, ok := envValue(env, "IMAGECTL_STORE"); ok && v != "" {
		return v
	}
	return store.DefaultDir
}

func registerStoreFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "store", "", "the image store (default: $IMAGECTL_STORE, else ./"+store.DefaultDir+")")
}

func checkOutput(output string) error {
	if output != "text" && output != "json" {
		return fmt.Errorf("--output must be text or json, not %q", output)
	}
	return nil
}

func newImagesCmd(env []string) *cobra.Command {
	var dir, output string
	cmd := &cobra.Command{
		Use:   "images",
		Short: "List the images and versions in the store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			imgs, err := store.NewDir(storeDir(dir, env)).Images(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), imgs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "IMAGE\tVERSION\tPUBLISHED\tSIZE\tSHA256\tSIGNED")
			for _, img := range imgs {
				for _, v := range img.Versions {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.12s\t%s\n", img.Name, v.Version, v.Published.Format(time.RFC3339), v.Size, v.SHA256, yesNo(v.Signed()))
				}
			}
			return tw.Flush()
		},
	}
	registerStoreFlag(cmd, &dir)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newShowCmd(env []string) *cobra.Command {
	var dir, output string
	cmd := &cobra.Command{
		Use:   "show IMAGE VERSION",
		Short: "Show one image version in the store: files, hashes, MAAS target, lineage",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			v, err := store.NewDir(storeDir(dir, env)).Version(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			m, err := manifest.Read(v.Manifest)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"version": v, "maas": m.MAAS, "lineage": m.Lineage,
					"deploy_findings": m.Deploy, "title": m.Image.Title, "architecture": m.Image.Architecture})
			}
			return showText(cmd.OutOrStdout(), v, m)
		},
	}
	registerStoreFlag(cmd, &dir)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func showText(w io.Writer, v *store.Version, m *manifest.Manifest) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "%s %s: %s\n", v.Image, v.Version, m.Image.Title)
	fmt.Fprintf(tw, "  published\t%s\n", v.Published.Format(time.RFC3339))
	fmt.Fprintf(tw, "  tgz\t%d bytes, sha256 %s\n", v.Size, v.SHA256)
	fmt.Fprintf(tw, "  signed\t%s\n", yesNo(v.Signed()))
	if t := m.MAAS; t != nil {
		fmt.Fprintf(tw, "  maas\t%s as %s (distro_series %s, base %s)\n", t.Name, t.VersionedName, t.DistroSeries, t.BaseImage)
	}
	if p := m.Lineage.ParentVersion; p != "" {
		fmt.Fprintf(tw, "  parent\t%s\n", p)
	}
	if r := m.Lineage.SourceRevision; r != "" {
		fmt.Fprintf(tw, "  source\t%s\n", r)
	}
	errs := len(m.DeployErrors())
	fmt.Fprintf(tw, "  deployability\t%d findings, %d blocking\n", len(m.Deploy), errs)
	fmt.Fprintf(tw, "  directory\t%s\n", v.Dir)
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range v.Files {
		fmt.Fprintf(tw, "    %s\t%s\t%d\t%.12s\n", f.Name, f.Role, f.Size, f.SHA256)
	}
	return tw.Flush()
}

// storeBuild is build's side of the store: a store.Build, adjusted to
// the build command's flags and result.
type storeBuild struct {
	b    *store.Build
	root string
}

// newStoreBuild returns nil when neither --store nor $IMAGECTL_STORE is
// set. When neither the recipe nor --version gives a version, it sets
// *version to the store's next one for the image (date and sequence).
// Without --output-dir the build writes into a staging directory inside
// the store, and publishing renames its files.
func newStoreBuild(ctx context.Context, flag, outputDir string, dryRun bool, env []string, r *recipes.Recipe, version *string) (*storeBuild, error) {
	if v, _ := envValue(env, "IMAGECTL_STORE"); flag == "" && v == "" {
		return nil, nil
	}
	st := store.NewDir(storeDir(flag, env))
	ver := *version
	if ver == "" {
		ver = r.Image.Version
	}
	b, err := st.StartBuild(ctx, store.BuildOptions{Image: r.Image.Name, Version: ver, DryRun: dryRun, Stage: outputDir == ""})
	if err != nil {
		return nil, err
	}
	if b.Generated {
		*version = b.Version
	}
	return &storeBuild{b: b, root: st.Root}, nil
}

func (sb *storeBuild) close() {
	if sb != nil {
		sb.b.Close()
	}
}

// adjust says in the plan where a store-generated version came from.
func (sb *storeBuild) adjust(p *builder.Plan) {
	if sb != nil && sb.b.Generated {
		p.Image.VersionFrom = "generated"
	}
}

func (sb *storeBuild) outputDir(flag string) string {
	if sb == nil || sb.b.OutputDir == "" {
		return flag
	}
	return sb.b.OutputDir
}

func (sb *storeBuild) parentVersion() string {
	if sb == nil {
		return ""
	}
	return sb.b.Parent
}

// publish puts the build's outputs into the store and points res and sigs
// at the published files.
func (sb *storeBuild) publish(ctx context.Context, res *builder.Result, sigs []string, log io.Writer) ([]string, error) {
	if sb == nil {
		return sigs, nil
	}
	v, err := sb.b.Publish(ctx, store.Artifact{Tarball: res.Tarball, Manifest: res.ManifestPath, ValidationScript: res.ValidationScript})
	if err != nil {
		return nil, err
	}
	res.Tarball, res.ManifestPath, res.ValidationScript = v.Tarball, v.Manifest, v.ValidationScript
	out := make([]string, len(sigs))
	for i, s := range sigs {
		out[i] = v.Path(s)
	}
	fmt.Fprintf(log, "published %s %s in the store %s\n", v.Image, v.Version, sb.root)
	return out, nil
}

//go:build guestfs

package smoke

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/testbase"
)

// BenchmarkCompareFirstBootH200StandIn is the project's headline figure:
// the Debian stand-in of the H200 recipe (testdata/h200-debian.hcl, with
// the test bundles) built once, then compared with its first boot as a
// slice host at stage converged (make bench). It reports each path's
// seconds to validated, their ratio (baked / first boot; issue 24's goal is
// at most 0.3), the median of two pairs run in alternating order, with
// their spread ((max - min) / median; issue 24 asks for 15% at most), and
// the bytes the first boot downloaded, and logs both timelines side by
// side.
func BenchmarkCompareFirstBootH200StandIn(b *testing.B) {
	vars := testbase.Vars(b)
	dir := b.TempDir()
	const bundles = "../testdata/bundles"
	r := standInRecipe(b, vars, bundles)
	tgz := buildStandIn(b, vars, dir, filepath.Join(dir, "cache"), "good", bundles)
	b.ResetTimer()
	for range b.N {
		c, err := Compare(context.Background(), tgz, CompareOptions{
			Options: Options{Profile: "slice", Stage: "converged", WorkDir: dir},
			Recipe:  r, BaseCache: filepath.Join(dir, "cache", cachedir.Base),
			// Two pairs, the order alternating: the spread says how far
			// one ratio can be trusted (issue 24: within 15%).
			Pairs: 2,
		})
		if c != nil {
			b.Log("\n" + c.Text())
		}
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(*c.Baked.ValidatedSeconds, "baked-s")
		b.ReportMetric(*c.FirstBoot.ValidatedSeconds, "first-boot-s")
		b.ReportMetric(*c.Ratio, "ratio")
		if c.Spread != nil {
			b.ReportMetric(*c.Spread, "ratio-spread")
		}
		b.ReportMetric(float64(c.FirstBoot.DownloadBytes), "first-boot-download-B")
	}
}

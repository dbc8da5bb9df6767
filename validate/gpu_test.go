package validate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
)

// The GPU checks run against every captured nvidia-smi fixture in
// testdata/nvidia-smi (real output of H100 and H200 hosts, see its README),
// replayed by testdata/nvidia-smi/replay.sh as nvidia-smi, and against
// edited replays of them.

const marker = "/etc/imagectl/build.json"

// gpuFixtures are the fixture directories.
func gpuFixtures(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("testdata/nvidia-smi/*/nvsmi-help-query-gpu.txt")
	if err != nil || len(dirs) < 3 {
		t.Fatalf("fixtures: %v %v", dirs, err)
	}
	for i, d := range dirs {
		dirs[i] = filepath.Dir(d)
	}
	return dirs
}

// The fixtures some tests name: the first H100 capture (replayed from its
// CSV query, values with units) and the H200 capture (every field).
const (
	h100CSV = "testdata/nvidia-smi/h100-80gb-hbm3-580"
	h200All = "testdata/nvidia-smi/h200-141gb-hbm3e-580"
)

// fixtureModel is the GPU model a fixture's directory names: h200-... is H200.
func fixtureModel(fixture string) string {
	return strings.ToUpper(strings.SplitN(filepath.Base(fixture), "-", 2)[0])
}

// gpuManifest checks count GPUs like the fixture's.
func gpuManifest(fixture string, count int) *manifest.Manifest {
	return &manifest.Manifest{
		SchemaVersion: manifest.SchemaVersion,
		Image:         manifest.Image{Name: "gpu", Version: "1.0.0"},
		Validation: manifest.Validation{Script: "/usr/local/sbin/gpu-validate.sh", Marker: marker,
			GPU: &manifest.GPU{Model: fixtureModel(fixture), Count: count, DriverBranch: "580", PersistenceMode: true, ECC: true}},
	}
}

// gpuHost replays the fixture as gpus GPUs, with edits ("INDEX FIELD VALUE").
func gpuHost(t *testing.T, awk, fixture string, gpus int, edits ...string) *host {
	t.Helper()
	h := newHost(t, awk)
	h.file(marker, "{\n  \"version\": \"1.0.0\",\n  \"top_key\": \"\"\n}\n")
	replay, err := os.ReadFile("testdata/nvidia-smi/replay.sh")
	if err != nil {
		t.Fatal(err)
	}
	h.stub("nvidia-smi", strings.TrimPrefix(string(replay), "#!/bin/sh\n"))
	abs, err := filepath.Abs(fixture)
	if err != nil {
		t.Fatal(err)
	}
	h.env["NVSMI_FIXTURE"] = abs
	h.env["NVSMI_GPUS"] = fmt.Sprint(gpus)
	h.env["NVSMI_EDITS"] = strings.Join(edits, "\n")
	return h
}

var gpuChecks = []string{"gpu:nvml", "gpu:count", "gpu:model", "gpu:driver", "gpu:persistence-mode", "gpu:ecc-mode",
	"gpu:ecc-errors", "gpu:row-remap", "gpu:retired-pages", "gpu:pcie-link"}

func TestGPUHealthyFixturesPass(t *testing.T) {
	t.Parallel()
	for _, awk := range awks() {
		for _, fx := range gpuFixtures(t) {
			for _, tc := range []struct {
				gpus       int
				gen, width int
			}{{1, 0, 0}, {8, 0, 0}, {8, 5, 16}} {
				t.Run(fmt.Sprintf("%s/%s/%d-gpus-gen%d-x%d", awk, filepath.Base(fx), tc.gpus, tc.gen, tc.width), func(t *testing.T) {
					t.Parallel()
					m := gpuManifest(fx, tc.gpus)
					m.Validation.GPU.PCIeGen, m.Validation.GPU.PCIeWidth = tc.gen, tc.width
					o := gpuHost(t, awk, fx, tc.gpus).run(m)
					if o.code != 0 || len(o.failed()) > 0 {
						t.Fatalf("exit %d:\n%s%s", o.code, o.out, o.stderr)
					}
					var got []string
					for _, l := range o.with("gpu:") {
						got = append(got, l.check)
						if l.status != "PASS" {
							t.Errorf("%s %s: %s", l.check, l.status, l.detail)
						}
					}
					if !slices.Equal(got, gpuChecks) {
						t.Errorf("gpu checks %v, want %v", got, gpuChecks)
					}
					o.expect(t, "gpu:count", "PASS", fmt.Sprintf("%d GPUs", tc.gpus))
					o.expect(t, "gpu:model", "PASS", fixtureModel(fx))
					o.expect(t, "gpu:driver", "PASS", "580.159.04")
					o.expect(t, "gpu:retired-pages", "PASS", "[N/A]", "remaps rows")
					o.expect(t, "gpu:pcie-link", "PASS", "gen 5 x16")
					if o.summary["failures"] != "0" || o.summary["profile"] != "bare-metal" {
						t.Errorf("summary %v", o.summary)
					}
				})
			}
		}
	}
}

// Each edit of a healthy replay fails exactly the check it breaks, naming
// the GPU.
func TestGPUFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		gpus    int
		gen     int // the recipe's PCIeGen
		edits   []string
		check   string
		details []string
	}{
		{"7 of 8 GPUs", 7, 0, nil, "gpu:count", []string{"7 GPUs", "expected 8"}},
		{"wrong model", 8, 0, []string{"3 name NVIDIA A100-SXM4-80GB"}, "gpu:model", []string{"GPU 3: NVIDIA A100-SXM4-80GB"}},
		{"other driver branch", 8, 0, []string{"* driver_version 570.133.20"}, "gpu:driver", []string{"GPU 0: driver 570.133.20", "GPU 7"}},
		{"persistence off", 8, 0, []string{"4 persistence_mode Disabled"}, "gpu:persistence-mode", []string{"GPU 4: persistence mode Disabled"}},
		{"ECC off", 8, 0, []string{"7 ecc.mode.current Disabled"}, "gpu:ecc-mode", []string{"GPU 7: ECC Disabled"}},
		{"ECC error", 8, 0, []string{"2 ecc.errors.uncorrected.volatile.total 4"}, "gpu:ecc-errors", []string{"GPU 2: 4 uncorrected"}},
		{"row remap pending", 8, 0, []string{"5 remapped_rows.pending Yes"}, "gpu:row-remap", []string{"GPU 5: row remap pending"}},
		{"row remap failed", 8, 0, []string{"6 remapped_rows.failure Yes"}, "gpu:row-remap", []string{"GPU 6: row remap failed"}},
		{"page retirement pending", 8, 0, []string{"0 retired_pages.pending Yes"}, "gpu:retired-pages", []string{"GPU 0: page retirement pending"}},
		{"link x8", 8, 0, []string{"1 pcie.link.width.current 8"}, "gpu:pcie-link", []string{"GPU 1: x8, expected x16"}},
		{"link gen lower, busy", 8, 0, []string{"6 pcie.link.gen.current 3", "6 clocks_event_reasons.gpu_idle Not Active"},
			"gpu:pcie-link", []string{"GPU 6: gen 3, expected gen 5"}},
		{"slot trains gen 4", 8, 5, []string{"* pcie.link.gen.max 4", "* pcie.link.gen.current 4"}, "gpu:pcie-link",
			[]string{"GPU 0: trains at gen 4 at most, expected gen 5"}},
	} {
		for _, awk := range awks() {
			for _, fx := range gpuFixtures(t) {
				t.Run(fmt.Sprintf("%s/%s/%s", tc.name, awk, filepath.Base(fx)), func(t *testing.T) {
					t.Parallel()
					m := gpuManifest(fx, 8)
					m.Validation.GPU.PCIeGen = tc.gen
					o := gpuHost(t, awk, fx, tc.gpus, tc.edits...).run(m)
					if got := o.failed(); o.code != 1 || !slices.Equal(got, []string{tc.check}) {
						t.Fatalf("exit %d, failed %v, want [%s]:\n%s", o.code, got, tc.check, o.out)
					}
					l := o.expect(t, tc.check, "FAIL", tc.details...)
					if l.remediation == "" {
						t.Error("no remediation")
					}
				})
			}
		}
	}
}

// A GPU below its gen while it reports itself idle passes, saying so; the
// first H100 capture does not answer the idle field, so there it fails.
func TestGPULinkGenIdle(t *testing.T) {
	t.Parallel()
	for _, fx := range gpuFixtures(t) {
		t.Run(filepath.Base(fx), func(t *testing.T) {
			t.Parallel()
			o := gpuHost(t, "awk", fx, 8, "2 pcie.link.gen.current 1").run(gpuManifest(fx, 8))
			if _, err := os.Stat(filepath.Join(fx, "query-gpu-all.tsv")); err == nil {
				o.expect(t, "gpu:pcie-link", "PASS", "GPU 2: idle at gen 1 of 5", "idle GPU lowers its link gen")
			} else {
				o.expect(t, "gpu:pcie-link", "FAIL", "GPU 2: gen 1, expected gen 5", "cannot tell whether it is idle")
			}
		})
	}
}

// Without a working nvidia-smi every GPU check WARNs on slice and FAILs on
// bare-metal; nvidia-fabricmanager is still asked on bare-metal.
func TestGPUUnavailable(t *testing.T) {
	t.Parallel()
	fx := h100CSV
	for _, mode := range []string{"absent", "failing"} {
		for _, profile := range manifest.Profiles {
			t.Run(mode+"/"+profile, func(t *testing.T) {
				t.Parallel()
				h := gpuHost(t, "awk", fx, 8)
				healthySlice(h)
				h.active("nvidia-fabricmanager")
				if mode == "absent" {
					h.unstub("nvidia-smi")
				} else {
					h.env["NVSMI_FAIL"] = "1"
				}
				m := gpuManifest(fx, 8)
				m.Validation.GPU.NVSwitch = true
				o := h.run(m, "--profile", profile)
				lines := o.with("gpu:")
				if len(lines) != len(gpuChecks)+1 {
					t.Fatalf("%d gpu lines:\n%s", len(lines), o.out)
				}
				for _, l := range lines {
					want := "WARN"
					if profile == manifest.ProfileBareMetal {
						want = "FAIL"
						if l.check == "gpu:fabricmanager" {
							want = "PASS"
						}
					}
					if l.status != want {
						t.Errorf("%s is %s, want %s: %s", l.check, l.status, want, l.detail)
					}
				}
				why := map[string]string{"absent": "nvidia-smi is not installed", "failing": "couldn't communicate with the NVIDIA driver"}[mode]
				o.expect(t, "gpu:count", o.get(t, "gpu:count").status, why)
				if profile == manifest.ProfileSlice {
					o.expect(t, "gpu:nvml", "WARN", "vfio-pci")
					if o.code != 0 {
						t.Errorf("exit %d on slice:\n%s", o.code, o.out)
					}
				} else if o.code != 1 {
					t.Errorf("exit %d on bare-metal", o.code)
				}
			})
		}
	}
}

// On slice, GPUs bound to vfio-pci are out of NVML's sight: fewer WARN.
func TestGPUCountOnSlice(t *testing.T) {
	t.Parallel()
	fx := h200All
	h := gpuHost(t, "awk", fx, 6)
	healthySlice(h)
	o := h.run(gpuManifest(fx, 8), "--profile", "slice")
	o.expect(t, "gpu:count", "WARN", "6 GPUs answer", "vfio-pci")
	if o.code != 0 {
		t.Errorf("exit %d:\n%s", o.code, o.out)
	}
	h.env["NVSMI_GPUS"] = "9"
	h.run(gpuManifest(fx, 8), "--profile", "slice").expect(t, "gpu:count", "FAIL", "9 GPUs answer")
}

func TestGPUFabricManager(t *testing.T) {
	t.Parallel()
	fx := h100CSV
	m := gpuManifest(fx, 1)
	m.Validation.GPU.NVSwitch = true
	h := gpuHost(t, "awk", fx, 1)
	h.active("nvidia-fabricmanager")
	h.run(m).expect(t, "gpu:fabricmanager", "PASS", "active")
	h.active()
	o := h.run(m)
	o.expect(t, "gpu:fabricmanager", "FAIL", "inactive")
	if !slices.Equal(o.failed(), []string{"gpu:fabricmanager"}) {
		t.Errorf("failed %v", o.failed())
	}
}

func TestGPUOffline(t *testing.T) {
	t.Parallel()
	fx := h100CSV
	h := gpuHost(t, "awk", fx, 1)
	o := h.run(gpuManifest(fx, 1), "--root", h.root)
	for _, l := range o.with("gpu:") {
		if l.status != "WARN" || l.detail != "needs a running host" {
			t.Errorf("%+v", l)
		}
	}
	if len(o.with("gpu:")) != len(gpuChecks) {
		t.Errorf("%d gpu lines:\n%s", len(o.with("gpu:")), o.out)
	}
}

// The fields the script asks for are fields nvidia-smi knows (its
// --help-query-gpu) and that every fixture answers, so the replay of each
// answers the query; the idle fields are known by one of their names.
func TestGPUFieldsAreKnown(t *testing.T) {
	t.Parallel()
	var fields []string
	for _, l := range strings.Split(shGPU, "\n") {
		if v, ok := strings.CutPrefix(l, "GPU_FIELDS="); ok {
			fields = append(fields, strings.Split(strings.TrimPrefix(v, "$GPU_FIELDS,"), ",")...)
		}
	}
	if len(fields) != 13 {
		t.Fatalf("fields %v", fields)
	}
	for _, fx := range gpuFixtures(t) {
		help, err := os.ReadFile(filepath.Join(fx, "nvsmi-help-query-gpu.txt"))
		if err != nil {
			t.Fatal(err)
		}
		// What the real nvidia-smi answered: a capture's CSV header, and
		// its every field where it has them (more than its help lists: the
		// retired_pages and remapped_rows fields are answered, not listed).
		csv, csvErr := os.ReadFile(filepath.Join(fx, "nvsmi-query.csv"))
		if csvErr == nil {
			header, _, _ := strings.Cut(string(csv), "\n")
			answered := ", " + header + ","
			for _, f := range fields {
				if !strings.Contains(answered, ", "+f+",") && !strings.Contains(answered, ", "+f+" [") {
					t.Errorf("%s: the captured query does not answer %s", fx, f)
				}
			}
		}
		all, allErr := os.ReadFile(filepath.Join(fx, "query-gpu-all.tsv"))
		if allErr == nil {
			for _, f := range fields {
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(f) + `\t`).Match(all) {
					t.Errorf("%s: query-gpu-all.tsv lacks %s", fx, f)
				}
			}
		}
		if csvErr != nil && allErr != nil {
			t.Errorf("%s: neither nvsmi-query.csv nor query-gpu-all.tsv: %v, %v", fx, csvErr, allErr)
		}
		for _, f := range []string{"pcie.link.gen.current", "pcie.link.width.max", "ecc.errors.uncorrected.volatile.total",
			"clocks_event_reasons.gpu_idle", "clocks_throttle_reasons.gpu_idle"} {
			if !strings.Contains(string(help), `"`+f+`"`) {
				t.Errorf("%s: --help-query-gpu does not list %s", fx, f)
			}
		}
		cmd := exec.Command("sh", "testdata/nvidia-smi/replay.sh", "--query-gpu="+strings.Join(fields, ","), "--format=csv,noheader,nounits")
		cmd.Env = append(os.Environ(), "NVSMI_FIXTURE="+fx)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Count(string(out), ", ") != len(fields)-1 {
			t.Errorf("%s: %v %s", fx, err, out)
		}
	}
}

// The replay answers as the real nvidia-smi did. On the host a capture
// was taken on, the validation script of recipes/h200.hcl with -var
// gpu_model=H100 -var gpu_count=1 -var nvswitch=false printed
// validate-gpu.txt, the same GPU lines under both profiles: that recipe's
// GPU block is gpuManifest's for one H100 (driver branch 580, persistence
// and ECC on, no NVSwitch), and the GPU lines depend on nothing else. The
// replay of the capture must give every check the same status, and each
// detail the same values (its numbers, in order); the wording around them
// may change with the script.
func TestReplayMatchesRealHost(t *testing.T) {
	t.Parallel()
	real, err := filepath.Glob("testdata/nvidia-smi/*/validate-gpu.txt")
	if err != nil || len(real) == 0 {
		t.Fatalf("no validate-gpu.txt: %v", err)
	}
	numbers := regexp.MustCompile(`[0-9]+(\.[0-9]+)*`)
	for _, path := range real {
		fx := filepath.Dir(path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := &outcome{out: string(data) + Prefix + " summary\n"}
		want.parse(t)
		for _, profile := range manifest.Profiles {
			t.Run(filepath.Base(fx)+"/"+profile, func(t *testing.T) {
				t.Parallel()
				got := gpuHost(t, "awk", fx, 1).run(gpuManifest(fx, 1), "--profile", profile).with("gpu:")
				if len(got) != len(want.lines) {
					t.Fatalf("the replay printed %d GPU lines, the real host %d:\n%+v", len(got), len(want.lines), got)
				}
				for i, w := range want.lines {
					g := got[i]
					if g.check != w.check || g.status != w.status ||
						!slices.Equal(numbers.FindAllString(g.detail, -1), numbers.FindAllString(w.detail, -1)) {
						t.Errorf("the replay: %s %s %q; the real host: %s %s %q", g.status, g.check, g.detail, w.status, w.check, w.detail)
					}
				}
			})
		}
	}
}

// The replay fails on a field the fixture lacks as nvidia-smi fails on an
// unknown field.
func TestReplayUnknownField(t *testing.T) {
	t.Parallel()
	for _, fx := range gpuFixtures(t) {
		cmd := exec.Command("sh", "testdata/nvidia-smi/replay.sh", "--query-gpu=index,bogus.field", "--format=csv,noheader,nounits")
		cmd.Env = append(os.Environ(), "NVSMI_FIXTURE="+fx)
		out, err := cmd.Output()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Fatalf("%s: %v", fx, err)
		}
		real, err := os.ReadFile("testdata/nvidia-smi/h200-141gb-hbm3e-580/query-bogus-field.txt")
		if err != nil {
			t.Fatal(err)
		}
		if want := regexp.MustCompile(`exit=2\n$`).ReplaceAllString(string(real), ""); string(out) != want {
			t.Errorf("%s: %q, nvidia-smi says %q", fx, out, want)
		}
	}
}

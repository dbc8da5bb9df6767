package validate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/manifest"
)

// The collector checks ask a stand-in curl (or wget) for Netdata's charts,
// served from testdata/netdata.

// fakeHTTP serves $FAKE_CHARTS for .../api/v1/charts, an empty chart list
// before call $FAKE_CHARTS_FROM_CALL, and fails as curl does on a refused
// connection when FAKE_CHARTS is unset. Every URL asked goes to
// $FAKE_HTTP_LOG.
const fakeHTTP = `url=''
for a; do url=$a; done
echo "$url" >>"$FAKE_HTTP_LOG"
if [ -z "${FAKE_CHARTS:-}" ]; then
	echo "curl: (7) Failed to connect to 127.0.0.1 port 19998: Connection refused" >&2
	exit 7
fi
case $url in
*/api/v1/charts) ;;
*) echo "curl: (22) The requested URL returned error: 404" >&2; exit 22 ;;
esac
if [ "$(wc -l <"$FAKE_HTTP_LOG")" -lt "${FAKE_CHARTS_FROM_CALL:-1}" ]; then
	echo '{"hostname":"h","charts":{}}'
else
	cat "$FAKE_CHARTS"
fi
`

func netdataManifest(wait int, collectors ...string) *manifest.Manifest {
	return &manifest.Manifest{
		SchemaVersion: manifest.SchemaVersion,
		Image:         manifest.Image{Name: "nd", Version: "1.0.0"},
		Netdata:       &manifest.Netdata{Enabled: true, Bind: "127.0.0.1:19998", RetentionMB: 256, Collectors: collectors},
		Validation: manifest.Validation{Script: "/usr/local/sbin/nd-validate.sh", Marker: marker,
			CollectorWaitSeconds: wait},
	}
}

// netdataHost serves charts (a testdata/netdata file; "" for a Netdata
// that does not answer) through the stand-in http (curl or wget).
func netdataHost(t *testing.T, awk, charts, http string) *host {
	t.Helper()
	h := newHost(t, awk)
	h.file(marker, "{\n  \"version\": \"1.0.0\",\n  \"top_key\": \"\"\n}\n")
	h.file("etc/netdata/netdata.conf", "[db]\n    dbengine multihost disk space MB = 256\n[web]\n    bind to = 127.0.0.1:19998\n")
	h.stub("ss", `echo "LISTEN 0      4096       127.0.0.1:19998      0.0.0.0:*"`)
	if http != "" {
		h.stub(http, fakeHTTP)
	}
	h.env["FAKE_HTTP_LOG"] = filepath.Join(h.root, "http.log")
	if strings.HasSuffix(charts, ".json") {
		abs, err := filepath.Abs(filepath.Join("testdata/netdata", charts))
		if err != nil {
			t.Fatal(err)
		}
		h.env["FAKE_CHARTS"] = abs
	}
	return h
}

// withGPU puts the replayed H200 on the host.
func withGPU(t *testing.T, h *host) {
	t.Helper()
	replay, err := os.ReadFile("testdata/nvidia-smi/replay.sh")
	if err != nil {
		t.Fatal(err)
	}
	h.stub("nvidia-smi", strings.TrimPrefix(string(replay), "#!/bin/sh\n"))
	abs, _ := filepath.Abs("testdata/nvidia-smi/h200-141gb-hbm3e-580")
	h.env["NVSMI_FIXTURE"] = abs
}

func (h *host) httpCalls() []string {
	b, _ := os.ReadFile(filepath.Join(h.root, "http.log"))
	return strings.Fields(string(b))
}

func TestNetdataCollectorsCollect(t *testing.T) {
	t.Parallel()
	for _, charts := range []string{"charts-1.37.json", "charts-current.json", "minified"} {
		for _, awk := range awks() {
			t.Run(charts+"/"+awk, func(t *testing.T) {
				t.Parallel()
				h := netdataHost(t, awk, charts, "curl")
				if charts == "minified" { // one line, as Netdata's minified JSON
					b, err := os.ReadFile("testdata/netdata/charts-current.json")
					if err != nil {
						t.Fatal(err)
					}
					h.file("minified.json", strings.NewReplacer("\n", "", "\t", "").Replace(string(b)))
					h.env["FAKE_CHARTS"] = filepath.Join(h.root, "minified.json")
				}
				withGPU(t, h)
				h.active("docker")
				collectors := []string{"cgroups", "apps", "proc", "nvidia_smi"}
				if charts != "charts-1.37.json" {
					collectors = append(collectors, "docker")
				}
				o := h.run(netdataManifest(30, collectors...))
				if o.code != 0 || o.summary["warnings"] != "0" {
					t.Fatalf("exit %d:\n%s", o.code, o.out)
				}
				for _, c := range collectors {
					o.expect(t, "netdata-collector:"+c, "PASS", "1 charts at http://127.0.0.1:19998")
				}
				if calls := h.httpCalls(); len(calls) != 1 || calls[0] != "http://127.0.0.1:19998/api/v1/charts" {
					t.Errorf("asked %v", calls)
				}
			})
		}
	}
}

// One cgroups.plugin chart and nothing else: the others FAIL, unless what
// they collect is not on the host, which WARNs; the wait is one bound for
// all of them.
func TestNetdataCollectorsMissing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, h *host)
		want  map[string]string // collector: status and detail
	}{
		{"no GPU, docker stopped", func(t *testing.T, h *host) {}, map[string]string{
			"cgroups": "PASS 1 charts", "apps": "FAIL no apps charts",
			"nvidia_smi": "WARN nvidia-smi is not installed", "docker": "WARN docker is inactive and there is no docker socket"}},
		{"NVML gone", func(t *testing.T, h *host) { withGPU(t, h); h.env["NVSMI_FAIL"] = "1" }, map[string]string{
			"nvidia_smi": "WARN nvidia-smi fails"}},
		{"GPU and docker here", func(t *testing.T, h *host) { withGPU(t, h); h.active("docker") }, map[string]string{
			"nvidia_smi": "FAIL no nvidia_smi charts", "docker": "FAIL no docker charts"}},
		{"docker socket-activated", func(t *testing.T, h *host) { h.file("run/docker.sock", "") }, map[string]string{
			"docker": "FAIL no docker charts"}},
	} {
		for _, awk := range awks() {
			t.Run(tc.name+"/"+awk, func(t *testing.T) {
				t.Parallel()
				h := netdataHost(t, awk, "charts-cgroups-only.json", "curl")
				tc.setup(t, h)
				o := h.run(netdataManifest(3, "cgroups", "apps", "nvidia_smi", "docker"))
				for c, want := range tc.want {
					status, detail, _ := strings.Cut(want, " ")
					l := o.expect(t, "netdata-collector:"+c, status, detail)
					if status == "FAIL" && !strings.Contains(l.remediation, c) {
						t.Errorf("remediation %q", l.remediation)
					}
				}
				// At least the bound, and one bound for all: a question a
				// second (counted, not timed: a loaded machine is slow) and
				// not one wait per collector, which would ask four times as
				// often.
				if o.elapsed < 3*time.Second {
					t.Errorf("took %s to wait 3s for collectors", o.elapsed)
				}
				if n := len(h.httpCalls()); n > 3+2 {
					t.Errorf("asked Netdata %d times in a 3s wait", n)
				}
			})
		}
	}
}

// On slice, Netdata is ops telemetry, no slice-readiness dependency.
func TestNetdataCollectorsOnSlice(t *testing.T) {
	t.Parallel()
	h := netdataHost(t, "awk", "charts-cgroups-only.json", "curl")
	healthySlice(h)
	o := h.run(netdataManifest(1, "cgroups", "apps"), "--profile", "slice")
	o.expect(t, "netdata-collector:cgroups", "PASS")
	o.expect(t, "netdata-collector:apps", "WARN", "no apps charts", "no slice-readiness dependency")
	if o.code != 0 {
		t.Errorf("exit %d:\n%s", o.code, o.out)
	}
}

// Charts that appear while the script waits pass; it stops asking then.
func TestNetdataCollectorsAppearLate(t *testing.T) {
	t.Parallel()
	h := netdataHost(t, "awk", "charts-current.json", "curl")
	h.env["FAKE_CHARTS_FROM_CALL"] = "3"
	o := h.run(netdataManifest(20, "cgroups", "apps"))
	o.expect(t, "netdata-collector:cgroups", "PASS")
	o.expect(t, "netdata-collector:apps", "PASS")
	if n := len(h.httpCalls()); n != 3 {
		t.Errorf("%d calls, %s", n, o.elapsed)
	}
}

func TestNetdataNotAnswering(t *testing.T) {
	t.Parallel()
	h := netdataHost(t, "awk", "", "curl")
	o := h.run(netdataManifest(1, "cgroups", "docker"))
	l := o.expect(t, "netdata-collector:cgroups", "FAIL", "Netdata did not answer at http://127.0.0.1:19998/api/v1/charts within 1s")
	if !strings.Contains(l.remediation, "systemctl status netdata") {
		t.Errorf("remediation %q", l.remediation)
	}
	o.expect(t, "netdata-collector:docker", "WARN", "no docker socket")
	if len(h.httpCalls()) < 2 {
		t.Errorf("asked %v", h.httpCalls())
	}
}

func TestNetdataWget(t *testing.T) {
	t.Parallel()
	h := netdataHost(t, "awk", "charts-cgroups-only.json", "wget")
	h.run(netdataManifest(5, "cgroups")).expect(t, "netdata-collector:cgroups", "PASS")
	h = netdataHost(t, "awk", "charts-cgroups-only.json", "")
	h.run(netdataManifest(5, "cgroups")).expect(t, "netdata-collector:cgroups", "WARN", "neither curl nor wget")
}

func TestNetdataCollectorsOffline(t *testing.T) {
	t.Parallel()
	h := netdataHost(t, "awk", "charts-cgroups-only.json", "curl")
	o := h.run(netdataManifest(5, "cgroups", "docker"), "--root", h.root)
	o.expect(t, "netdata-collector:cgroups", "WARN", "needs a running host")
	o.expect(t, "netdata-collector:docker", "WARN", "needs a running host")
	if len(h.httpCalls()) != 0 {
		t.Errorf("asked %v offline", h.httpCalls())
	}
}

// The script asks Netdata where it binds, a wildcard meaning loopback, and
// waits the recipe's bound or 60s.
func TestNetdataURL(t *testing.T) {
	for bind, want := range map[string]string{
		"127.0.0.1:19998":               "http://127.0.0.1:19998",
		"0.0.0.0:19999":                 "http://127.0.0.1:19999",
		"*:19999":                       "http://127.0.0.1:19999",
		"[::]:19999":                    "http://127.0.0.1:19999",
		"":                              "http://127.0.0.1:19999",
		"10.1.2.3":                      "http://10.1.2.3:19999",
		"[::1]:19998":                   "http://[::1]:19998",
		"127.0.0.1:19998=dashboard *:1": "http://127.0.0.1:19998",
	} {
		if got := netdataURL(bind); got != want {
			t.Errorf("netdataURL(%q) = %s, want %s", bind, got, want)
		}
	}
	script, err := Script(netdataManifest(0, "cgroups"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\ncheck_netdata_collectors 'http://127.0.0.1:19998' '60' 'cgroups'\n") {
		t.Errorf("no collector check with the default wait:\n%s", script)
	}
}

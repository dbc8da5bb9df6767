package maassim_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/upload/maassim"
)

// rackGet sends a GET to a rack's :5248 (no authentication, as curtin),
// reading at most limit bytes of the body (-1: all of it).
func rackGet(t *testing.T, sim *maassim.Server, rk *maassim.Rack, path string, header http.Header, limit int64) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest("GET", fmt.Sprintf("http://%s:%d%s", rk.Address, sim.RackPort(), path), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var b []byte
	if limit < 0 {
		b, err = io.ReadAll(resp.Body)
	} else {
		b = make([]byte, limit)
		_, err = io.ReadFull(resp.Body, b)
	}
	if err != nil {
		t.Fatalf("reading %s from %s: %v", path, rk.Hostname, err)
	}
	return resp, b, nil
}

// uploadThroughAPI creates and uploads content in one chunk, as a client
// would, and returns its filename on disk.
func uploadThroughAPI(t *testing.T, sim *maassim.Server, name string, content []byte) string {
	t.Helper()
	res := create(t, sim, createForm(name, content))
	r := do(t, sim, sim.AdminKey, "PUT", uploadURI(t, res), bytes.NewReader(content),
		http.Header{"Content-Type": {"application/octet-stream"}, "Content-Length": {strconv.Itoa(len(content))}})
	if r.status != http.StatusOK {
		t.Fatalf("chunk: %d %s", r.status, r.body)
	}
	g := do(t, sim, sim.AdminKey, "GET", fmt.Sprintf("boot-resources/%d/", res.ID), nil, nil)
	var got resource
	if err := json.Unmarshal([]byte(g.body), &got); err != nil {
		t.Fatal(err)
	}
	for _, s := range got.Sets {
		for _, f := range s.Files {
			if f.FilenameOnDisk != "" {
				return f.FilenameOnDisk
			}
		}
	}
	t.Fatalf("no filename_on_disk in %s", g.body)
	return ""
}

func TestRacksServeThroughTheirCache(t *testing.T) {
	sim := maassim.New(maassim.Options{CompleteAfterGets: -1, Racks: []maassim.RackSpec{
		{Hostname: "good"}, {Hostname: "noregion", State: maassim.RackNoRegion}, {Hostname: "stopped", State: maassim.RackAgentStopped},
		{Hostname: "away", State: maassim.RackUnreachable}, {Hostname: "stale", State: maassim.RackOtherBytes}}})
	defer sim.Close()
	// Larger than loopback's socket buffers, so a cut read is cut.
	content := make([]byte, 20<<20)
	rand.Read(content)
	onDisk := uploadThroughAPI(t, sim, "x-1-0-0", content)
	path := "/images/" + onDisk + "/custom/amd64/generic/x-1-0-0/uploaded/root.tgz"
	rk := sim.Racks()
	good, noregion, stopped, away, stale := rk[0], rk[1], rk[2], rk[3], rk[4]

	// Cold: a Range is answered 206 from the region and warms nothing;
	// nor does a full GET read only in part.
	resp, b, err := rackGet(t, sim, good, path, http.Header{"Range": {"bytes=0-99"}}, -1)
	if err != nil || resp.StatusCode != http.StatusPartialContent || resp.Header.Get("X-Cache") != "MISS" || !bytes.Equal(b, content[:100]) {
		t.Fatalf("cold range: %v %v %d", err, resp, len(b))
	}
	if _, _, err := rackGet(t, sim, good, path, nil, 1000); err != nil {
		t.Fatal(err)
	}
	good.Idle()
	if good.Cached(onDisk) {
		t.Fatal("a Range or a cut read warmed the cache")
	}
	// A full read to the end fills it: then it is a HIT, and Range works.
	resp, b, _ = rackGet(t, sim, good, path, nil, -1)
	good.Idle()
	if resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "MISS" || !bytes.Equal(b, content) || !good.Cached(onDisk) {
		t.Fatalf("fill: %d %q %d cached=%v", resp.StatusCode, resp.Header.Get("X-Cache"), len(b), good.Cached(onDisk))
	}
	resp, b, _ = rackGet(t, sim, good, path, http.Header{"Range": {"bytes=10-19"}}, -1)
	if resp.StatusCode != http.StatusPartialContent || resp.Header.Get("X-Cache") != "HIT" || !bytes.Equal(b, content[10:20]) {
		t.Fatalf("warm range: %d %q", resp.StatusCode, resp.Header.Get("X-Cache"))
	}
	if fills, _, _ := good.Fills(); fills != 1 {
		t.Fatalf("fills %d: want 1", fills)
	}
	// Only the first segment matters; an unknown one is the region's 404.
	if resp, _, _ := rackGet(t, sim, good, "/images/0000000/anything", nil, -1); resp.StatusCode != 404 {
		t.Fatalf("unknown file: %d", resp.StatusCode)
	}

	if resp, _, _ := rackGet(t, sim, noregion, path, nil, -1); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("rack without a region: %d", resp.StatusCode)
	}
	if resp, _, _ := rackGet(t, sim, stopped, path, nil, -1); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("rack whose agent is stopped: %d", resp.StatusCode)
	}
	if _, _, err := rackGet(t, sim, away, path, nil, -1); err == nil {
		t.Fatal("the unreachable rack answered")
	}
	resp, b, _ = rackGet(t, sim, stale, path, nil, -1)
	if resp.StatusCode != 200 || len(b) != len(content) || bytes.Equal(b, content) {
		t.Fatalf("rack serving other bytes: %d, %d bytes, same=%v", resp.StatusCode, len(b), bytes.Equal(b, content))
	}

	// Back in reach, it serves.
	if err := away.SetState(maassim.RackHealthy); err != nil {
		t.Fatal(err)
	}
	resp, b, err = rackGet(t, sim, away, path, nil, -1)
	away.Idle()
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, content) || !away.Cached(onDisk) {
		t.Fatalf("rack back in reach: %v", err)
	}

	// The API: addresses, the DHCP VLAN each serves, services.
	r := do(t, sim, sim.UserKey, "GET", "rackcontrollers/", nil, nil)
	var racks []struct {
		SystemID    string                          `json:"system_id"`
		Hostname    string                          `json:"hostname"`
		IPAddresses []string                        `json:"ip_addresses"`
		Services    []struct{ Name, Status string } `json:"service_set"`
		Interfaces  []struct {
			Links []struct {
				IPAddress string `json:"ip_address"`
				Subnet    struct {
					VLAN struct {
						DHCPOn      bool   `json:"dhcp_on"`
						PrimaryRack string `json:"primary_rack"`
					} `json:"vlan"`
				} `json:"subnet"`
			} `json:"links"`
		} `json:"interface_set"`
	}
	if err := json.Unmarshal([]byte(r.body), &racks); err != nil || len(racks) != 5 {
		t.Fatalf("rackcontrollers: %v %s", err, r.body)
	}
	for i, rc := range racks {
		var dhcp []string
		for _, ifc := range rc.Interfaces {
			for _, l := range ifc.Links {
				if l.Subnet.VLAN.DHCPOn && l.Subnet.VLAN.PrimaryRack == rc.SystemID {
					dhcp = append(dhcp, l.IPAddress)
				}
			}
		}
		if len(dhcp) != 1 || dhcp[0] != rk[i].Address || len(rc.IPAddresses) != 2 {
			t.Errorf("rack %s: DHCP addresses %v, ip_addresses %v; want [%s]", rc.Hostname, dhcp, rc.IPAddresses, rk[i].Address)
		}
		agent := ""
		for _, s := range rc.Services {
			if s.Name == "agent" {
				agent = s.Status
			}
		}
		if want := map[bool]string{true: "dead", false: "running"}[rc.Hostname == "stopped"]; agent != want {
			t.Errorf("rack %s: agent %q, want %q", rc.Hostname, agent, want)
		}
	}
	if r := do(t, sim, "", "GET", "version/", nil, nil); !strings.Contains(r.body, `"version":"3.7.0"`) {
		t.Errorf("version/: %s", r.body)
	}
	if r := do(t, sim, sim.UserKey, "GET", "fabrics/", nil, nil); r.status != 200 || !strings.Contains(r.body, `"primary_rack":"rk0001"`) {
		t.Errorf("fabrics/: %d %s", r.status, r.body)
	}
	// From 3.5 list_boot_images is a stub that says synced.
	if r := do(t, sim, sim.UserKey, "GET", "rackcontrollers/rk0002/?op=list_boot_images", nil, nil); !strings.Contains(r.body, `"status":"synced"`) {
		t.Errorf("list_boot_images on 3.7: %s", r.body)
	}
}

func TestRacks34ImportAndServeTheirOwnCopies(t *testing.T) {
	sim := maassim.New(maassim.Options{Version: "3.4", Racks: []maassim.RackSpec{{}, {State: maassim.RackNoRegion}}})
	defer sim.Close()
	content := make([]byte, 64<<10)
	rand.Read(content)
	if _, _, err := sim.Seed("x-1-0-0", "amd64/generic", bytes.NewReader(content), int64(len(content))); err != nil {
		t.Fatal(err)
	}
	path := "/images/custom/amd64/generic/x-1-0-0/uploaded/root-tgz"
	rk := sim.Racks()[0]
	list := func(id string) string {
		return do(t, sim, sim.UserKey, "GET", "rackcontrollers/"+id+"/?op=list_boot_images", nil, nil).body
	}
	if l := list(rk.SystemID); !strings.Contains(l, `"status":"out-of-sync"`) {
		t.Fatalf("before import: %s", l)
	}
	if resp, _, _ := rackGet(t, sim, rk, path, nil, -1); resp.StatusCode != 404 {
		t.Fatalf("before import: %d", resp.StatusCode)
	}
	if r := do(t, sim, sim.UserKey, "POST", "rackcontrollers/"+rk.SystemID+"/?op=import_boot_images", nil, nil); r.status != http.StatusForbidden {
		t.Fatalf("a user's import: %d", r.status)
	}
	for _, r := range sim.Racks() {
		if r := do(t, sim, sim.AdminKey, "POST", "rackcontrollers/"+r.SystemID+"/?op=import_boot_images", nil, nil); r.status != 200 {
			t.Fatalf("import: %d %s", r.status, r.body)
		}
	}
	if l := list(rk.SystemID); !strings.Contains(l, `"status":"synced"`) || !strings.Contains(l, `"custom/x-1-0-0"`) {
		t.Fatalf("after import: %s", l)
	}
	resp, b, _ := rackGet(t, sim, rk, path, nil, -1)
	if resp.StatusCode != 200 || !bytes.Equal(b, content) || resp.Header.Get("X-Cache") != "" {
		t.Fatalf("after import: %d X-Cache %q", resp.StatusCode, resp.Header.Get("X-Cache"))
	}
	// A rack that cannot reach its region imports nothing.
	other := sim.Racks()[1]
	if l := list(other.SystemID); !strings.Contains(l, `"status":"out-of-sync"`) || other.Imported("x-1-0-0", "amd64/generic") {
		t.Fatalf("rack without a region after import: %s", l)
	}
	if r := do(t, sim, sim.UserKey, "GET", "rackcontrollers/", nil, nil); strings.Contains(r.body, `"agent"`) {
		t.Errorf("3.4 racks have no agent: %s", r.body)
	}
}

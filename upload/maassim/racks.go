package maassim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RackState is how a simulated rack controller behaves.
type RackState string

// Rack states, after the rules of the reference (docs/racks.md).
const (
	// RackHealthy serves what the region holds through its cache.
	RackHealthy RackState = "healthy"
	// RackNoRegion cannot reach a region: what it has not cached is
	// answered 502 Bad Gateway.
	RackNoRegion RackState = "no-region"
	// RackAgentStopped has its agent stopped: the API's service_set says
	// so, and its :5248 (nginx without the agent behind it) answers 503.
	RackAgentStopped RackState = "agent-stopped"
	// RackUnreachable cannot be reached from the checking host: nothing
	// listens at its address, as the API shows it running.
	RackUnreachable RackState = "unreachable"
	// RackDegraded serves as a healthy rack does while the API's
	// service_set says its rackd is degraded (as MAAS says when one of
	// its services, say dhcpd, is down).
	RackDegraded RackState = "degraded"
	// RackEndless serves the region's bytes, then more, without end (a
	// broken proxy): a client that reads without a bound never finishes.
	RackEndless RackState = "endless"
	// RackLostCopy answers 404 for every image: on 3.4 its image list
	// still names what it imported (names, not bytes) while its copy on
	// disk is gone; from 3.5 as if its region's 404 were passed through.
	RackLostCopy RackState = "lost-copy"
	// RackOtherBytes serves bytes other than the region's (a stale or
	// corrupt cache), with a 200 and the right length.
	RackOtherBytes RackState = "other-bytes"
)

// RackSpec is a rack controller of the simulated MAAS.
type RackSpec struct {
	// Hostname; default rackN.
	Hostname string
	// State; default RackHealthy.
	State RackState
	// NoDHCP: the rack serves DHCP on no VLAN (its machine-facing VLAN
	// has dhcp_on false), so a client falls back to all its addresses,
	// the management one (where nothing listens) first.
	NoDHCP bool
}

// Rack is a running simulated rack controller: a :5248-style HTTP server
// on a loopback address of its own (127.0.0.N, the same port for every
// rack of a server: Server.RackPort), serving the region's files through
// a cache from 3.5, or its own imported copies on 3.4.
type Rack struct {
	// SystemID and Hostname are as the API lists them; Address is the
	// machine-facing address (on the VLAN it serves DHCP on).
	SystemID, Hostname, Address string

	s      *Server
	vlan   int
	noDHCP bool
	mu     sync.Mutex
	state  RackState
	srv    *http.Server
	// cache holds the filenames on disk whose full fill ended (3.5+).
	cache map[string]bool
	// images are the names (name arch) the rack imported (3.4).
	images map[string]bool
	// fills and fillsNow count full fills from the region, maxFills the
	// most at one time; requests every GET or HEAD.
	fills, fillsNow, maxFills, requests int
	// inflight counts the requests being answered; idle is signalled
	// when it drops to zero.
	inflight int
	idle     *sync.Cond
}

// RackPort is the port every rack of the server listens on (5248 on a
// real rack).
func (s *Server) RackPort() int { return s.rackPort }

// Racks returns the server's racks, in the order of Options.Racks.
func (s *Server) Racks() []*Rack { return s.racks }

// startRacks puts every rack on 127.0.0.(2+i) at one free port.
func (s *Server) startRacks(specs []RackSpec) {
	dir, err := os.MkdirTemp("", "maassim-files-")
	if err != nil {
		panic(fmt.Sprintf("maassim: a folder for the racks' files: %v", err))
	}
	s.spoolDir = dir
	for i, sp := range specs {
		rk := &Rack{s: s, SystemID: fmt.Sprintf("rk%04d", i+1), Hostname: sp.Hostname, state: sp.State,
			Address: fmt.Sprintf("127.0.0.%d", 2+i), vlan: 5001 + i, noDHCP: sp.NoDHCP, cache: map[string]bool{}, images: map[string]bool{}}
		if rk.Hostname == "" {
			rk.Hostname = fmt.Sprintf("rack%d", i+1)
		}
		if rk.state == "" {
			rk.state = RackHealthy
		}
		rk.idle = sync.NewCond(&rk.mu)
		s.racks = append(s.racks, rk)
	}
	for try := 0; ; try++ {
		l, err := net.Listen("tcp", s.racks[0].Address+":0")
		if err != nil {
			panic(fmt.Sprintf("maassim: listening for rack %s: %v", s.racks[0].Hostname, err))
		}
		s.rackPort = l.Addr().(*net.TCPAddr).Port
		l.Close()
		if err = s.listenRacks(); err == nil {
			return
		}
		s.stopRacks()
		if try == 10 {
			panic(fmt.Sprintf("maassim: no port free on every rack's address: %v", err))
		}
	}
}

func (s *Server) listenRacks() error {
	for _, rk := range s.racks {
		if rk.State() == RackUnreachable {
			continue
		}
		if err := rk.listen(); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) stopRacks() {
	for _, rk := range s.racks {
		rk.mu.Lock()
		srv := rk.srv
		rk.srv = nil
		rk.mu.Unlock()
		if srv != nil {
			srv.Close()
		}
	}
	if s.spoolDir != "" {
		s.mu.Lock()
		for _, r := range s.resources {
			for _, st := range r.sets {
				for _, f := range st.files {
					if f.spooled != nil {
						f.spooled.Close()
					}
				}
			}
		}
		s.mu.Unlock()
		os.RemoveAll(s.spoolDir)
	}
}

func (rk *Rack) listen() error {
	l, err := net.Listen("tcp", net.JoinHostPort(rk.Address, strconv.Itoa(rk.s.rackPort)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(rk.serve), ReadHeaderTimeout: time.Minute}
	rk.mu.Lock()
	rk.srv = srv
	rk.mu.Unlock()
	go srv.Serve(l)
	return nil
}

// State returns the rack's state.
func (rk *Rack) State() RackState {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	return rk.state
}

// SetState changes how the rack behaves from now on: an unreachable rack
// stops listening, one that becomes reachable listens again.
func (rk *Rack) SetState(st RackState) error {
	rk.mu.Lock()
	prev, srv := rk.state, rk.srv
	rk.state = st
	if st == RackUnreachable {
		rk.srv = nil
	}
	rk.mu.Unlock()
	switch {
	case st == RackUnreachable && srv != nil:
		return srv.Close()
	case prev == RackUnreachable && st != RackUnreachable:
		return rk.listen()
	}
	return nil
}

// Cached reports whether the rack's cache holds the file stored as
// filenameOnDisk (3.5+; only a full fill caches: one its client read to
// the end, or to its last byte).
func (rk *Rack) Cached(filenameOnDisk string) bool {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	return rk.cache[filenameOnDisk]
}

// Imported reports whether a 3.4 rack imported the resource name of arch.
func (rk *Rack) Imported(name, arch string) bool {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	return rk.images[name+" "+arch]
}

// Idle waits until the rack answers no request: a client may have read
// the last byte of a response a moment before the rack's handler ended.
func (rk *Rack) Idle() {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	for rk.inflight > 0 {
		rk.idle.Wait()
	}
}

// Fills returns how many full fills from the region the rack made, the
// most it made at one time, and how many GETs and HEADs it answered.
func (rk *Rack) Fills() (fills, maxAtOnce, requests int) {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	return rk.fills, rk.maxFills, rk.requests
}

// spool gives a new file a place on disk for its bytes, when the server
// has racks to serve them.
func (s *Server) spool(f *rfile) {
	if s.spoolDir == "" {
		return
	}
	sp, err := os.CreateTemp(s.spoolDir, "file-")
	if err != nil {
		panic(fmt.Sprintf("maassim: a file for the racks: %v", err))
	}
	f.spooled, f.content = sp, sp
}

// Seed adds a complete uploaded resource (MAAS's name, such as
// "x-1-4-0", and architecture) whose file's bytes are read from content
// when a rack serves it, so tests and benchmarks need not upload large
// files through the API; its sha256 is computed here. It returns the
// file's sha256 and filename on disk (3.5+).
func (s *Server) Seed(name, arch string, content io.ReaderAt, size int64) (sha, onDisk string, err error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(content, 0, size)); err != nil {
		return "", "", fmt.Errorf("maassim: reading the content of %s: %w", name, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.nextFileID++
	f := &rfile{id: s.nextFileID, filetype: "tgz", filename: "root-tgz", sha256: sum, size: size, received: size,
		verified: true, content: content, h: h}
	if s.atLeast(3, 5) {
		f.filename, f.onDisk = "root.tgz", s.onDiskName(sum)
	}
	res := &resource{id: s.nextID, rtype: typeUploaded, name: strings.TrimPrefix(name, "custom/"), arch: arch,
		title: name, baseImage: "ubuntu/noble"}
	res.sets = []*rset{{version: s.nextVersion(res), label: "uploaded", files: []*rfile{f}}}
	s.resources[s.nextID] = res
	return sum, f.onDisk, nil
}

// servedFile finds a verified file by its first path segment: its name
// on disk (3.5+), which is its sha256 on 3.5.0 and 3.5.1 and a short
// filename_on_disk from 3.5.2 (onDiskName).
func (s *Server) servedFile(key string) *rfile {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.resources {
		for _, st := range r.sets {
			for _, f := range st.files {
				if f.verified && f.content != nil && f.onDisk == key {
					return f
				}
			}
		}
	}
	return nil
}

// serve is the rack's :5248: /images/<filename_on_disk>/… through the
// cache from 3.5, /images/custom/<arch>/<subarch>/<series>/uploaded/<file>
// from its imported copies on 3.4.
func (rk *Rack) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	rk.mu.Lock()
	rk.requests++
	rk.inflight++
	state := rk.state
	rk.mu.Unlock()
	defer func() {
		rk.mu.Lock()
		if rk.inflight--; rk.inflight == 0 {
			rk.idle.Broadcast()
		}
		rk.mu.Unlock()
	}()
	rest, ok := strings.CutPrefix(r.URL.Path, "/images/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if state == RackAgentStopped {
		textError(w, http.StatusServiceUnavailable, "503 Service Temporarily Unavailable")
		return
	}
	if !rk.s.atLeast(3, 5) {
		rk.serve34(w, r, rest, state)
		return
	}
	key, _, _ := strings.Cut(rest, "/")
	f := rk.s.servedFile(key)
	rk.mu.Lock()
	hit := f != nil && rk.cache[f.onDisk] && state != RackLostCopy
	rk.mu.Unlock()
	var content io.ReaderAt
	var size int64
	if f != nil {
		content, size = f.content, f.size
		if state == RackOtherBytes {
			content = flipAt{content}
		}
	}
	switch {
	case hit:
		w.Header().Set("X-Cache", "HIT")
		http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(content, 0, size))
		return
	case state == RackNoRegion:
		textError(w, http.StatusBadGateway, "502 Bad Gateway")
		return
	case f == nil || state == RackLostCopy:
		// The region's 404, passed through.
		textError(w, http.StatusNotFound, "404 Not Found")
		return
	}
	w.Header().Set("X-Cache", "MISS")
	if state == RackEndless && r.Method == http.MethodGet {
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, io.MultiReader(io.NewSectionReader(content, 0, size), endless{}))
		return
	}
	if r.Header.Get("Range") != "" || r.Method == http.MethodHead {
		// Answered from the region, warming nothing.
		http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(content, 0, size))
		return
	}
	rk.mu.Lock()
	rk.fillsNow++
	rk.maxFills = max(rk.maxFills, rk.fillsNow)
	rk.mu.Unlock()
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	// The proxy has the region's last byte before its client does: the
	// cache holds the file before the last byte is sent, so a client
	// that read it all and asks again hits.
	last := max(size-1, 0)
	n, err := io.Copy(w, io.NewSectionReader(content, 0, last))
	rk.mu.Lock()
	rk.fillsNow--
	if err == nil && n == last {
		rk.fills++
		rk.cache[f.onDisk] = true
	}
	rk.mu.Unlock()
	if err == nil && n == last {
		_, _ = io.Copy(w, io.NewSectionReader(content, last, size-last))
	}
}

// serve34 serves a 3.4 rack's own copy of an uploaded image (no cache,
// no X-Cache): /images/custom/<arch>/<subarch>/<series>/uploaded/<file>.
func (rk *Rack) serve34(w http.ResponseWriter, r *http.Request, rest string, state RackState) {
	p := strings.Split(rest, "/")
	if len(p) != 6 || p[0] != "custom" || p[4] != "uploaded" {
		textError(w, http.StatusNotFound, "404 Not Found")
		return
	}
	arch, series := p[1]+"/"+p[2], p[3]
	rk.mu.Lock()
	imported := rk.images[series+" "+arch]
	rk.mu.Unlock()
	var f *rfile
	if imported {
		rk.s.mu.Lock()
		for _, res := range rk.s.resources {
			if res.rtype == typeUploaded && res.name == series && res.arch == arch {
				for _, st := range res.sets {
					for _, ff := range st.files {
						if ff.verified && ff.content != nil && ff.filename == p[5] {
							f = ff
						}
					}
				}
			}
		}
		rk.s.mu.Unlock()
	}
	if f == nil || state == RackLostCopy {
		textError(w, http.StatusNotFound, "404 Not Found")
		return
	}
	content := f.content
	if state == RackOtherBytes {
		content = flipAt{content}
	}
	http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(content, 0, f.size))
}

// flipAt reads bytes other than r's: the first byte flipped.
type flipAt struct{ r io.ReaderAt }

func (f flipAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.r.ReadAt(p, off)
	if off == 0 && n > 0 {
		p[0] ^= 0xff
	}
	return n, err
}

// version answers GET version/.
func (s *Server) version(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]any{"version": s.fullVersion(), "subversion": "sim",
		"capabilities": []string{"networks-management", "static-ipaddresses"}})
}

// serveRacksAPI answers rackcontrollers/ (the list, and a rack's
// op=list_boot_images and op=import_boot_images) and fabrics/.
func (s *Server) serveRacksAPI(w http.ResponseWriter, r *http.Request, rest string, tok token) {
	if rest == "fabrics/" {
		if r.Method != http.MethodGet {
			methodNotAllowed(w, "GET")
			return
		}
		writeJSON(w, http.StatusOK, s.fabrics())
		return
	}
	if rest == "rackcontrollers/" {
		if r.Method != http.MethodGet {
			methodNotAllowed(w, "GET")
			return
		}
		out := []map[string]any{}
		for _, rk := range s.racks {
			out = append(out, rk.dict())
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	id := strings.TrimSuffix(strings.TrimPrefix(rest, "rackcontrollers/"), "/")
	var rk *Rack
	for _, c := range s.racks {
		if c.SystemID == id {
			rk = c
		}
	}
	if rk == nil || strings.Contains(id, "/") {
		textError(w, http.StatusNotFound, "No RackController matches the given query.")
		return
	}
	switch op := r.URL.Query().Get("op"); {
	case r.Method == http.MethodGet && op == "":
		writeJSON(w, http.StatusOK, rk.dict())
	case r.Method == http.MethodGet && op == "list_boot_images":
		writeJSON(w, http.StatusOK, rk.bootImages())
	case r.Method == http.MethodPost && op == "import_boot_images":
		if !tok.admin {
			textError(w, http.StatusForbidden, "This method is reserved for admin users.")
			return
		}
		rk.importImages()
		writeJSON(w, http.StatusOK, "Import of boot images started on "+rk.Hostname)
	default:
		textError(w, http.StatusBadRequest, fmt.Sprintf("Unrecognised signature: method=%s op=%s", r.Method, op))
	}
}

func (s *Server) fabrics() []map[string]any {
	vlans := []map[string]any{{"id": 5000, "vid": 0, "fabric_id": 0, "dhcp_on": false, "primary_rack": nil, "secondary_rack": nil}}
	out := []map[string]any{{"id": 0, "name": "fabric-0", "vlans": vlans}}
	for i, rk := range s.racks {
		out = append(out, map[string]any{"id": i + 1, "name": fmt.Sprintf("fabric-%d", i+1), "vlans": []map[string]any{rk.vlanDict()}})
	}
	return out
}

func (rk *Rack) vlanDict() map[string]any {
	if rk.noDHCP {
		return map[string]any{"id": rk.vlan, "vid": 0, "fabric_id": rk.vlan - 5000, "dhcp_on": false, "primary_rack": nil, "secondary_rack": nil}
	}
	return map[string]any{"id": rk.vlan, "vid": 0, "fabric_id": rk.vlan - 5000, "dhcp_on": true, "primary_rack": rk.SystemID, "secondary_rack": nil}
}

// mgmtAddress is the rack's address on the management VLAN (no DHCP):
// nothing listens there, so a check that uses it instead of the
// machine-facing address finds nothing.
func (rk *Rack) mgmtAddress() string { return "127.1.0." + strings.TrimPrefix(rk.Address, "127.0.0.") }

func (rk *Rack) dict() map[string]any {
	rk.mu.Lock()
	state := rk.state
	rk.mu.Unlock()
	rackd := "running"
	if state == RackDegraded {
		rackd = "degraded"
	}
	services := []map[string]any{{"name": "rackd", "status": rackd}, {"name": "http", "status": "running"},
		{"name": "dhcpd", "status": "running"}}
	if rk.s.atLeast(3, 5) {
		agent := "running"
		if state == RackAgentStopped {
			agent = "dead"
		}
		services = append(services, map[string]any{"name": "agent", "status": agent})
	}
	return map[string]any{
		"system_id": rk.SystemID, "hostname": rk.Hostname, "fqdn": rk.Hostname + ".maas", "node_type_name": "Rack controller",
		"version":      rk.s.fullVersion(),
		"ip_addresses": []string{rk.mgmtAddress(), rk.Address},
		"interface_set": []map[string]any{
			{"name": "eth0", "links": []map[string]any{{"ip_address": rk.mgmtAddress(), "subnet": map[string]any{"cidr": "127.1.0.0/16",
				"vlan": map[string]any{"id": 5000, "vid": 0, "fabric_id": 0, "dhcp_on": false}}}}},
			{"name": "eth1", "links": []map[string]any{{"ip_address": rk.Address, "subnet": map[string]any{"cidr": "127.0.0.0/16",
				"vlan": rk.vlanDict()}}}},
		},
		"service_set":   services,
		"resource_uri":  fmt.Sprintf("%srackcontrollers/%s/", APIPrefix, rk.SystemID),
		"power_state":   "on",
		"status_action": "",
	}
}

// bootImages is list_boot_images: on 3.4 the rack's own images and
// whether they match the region's names; from 3.5 a stub that always
// says synced.
func (rk *Rack) bootImages() map[string]any {
	images := []map[string]any{}
	if !rk.s.atLeast(3, 5) {
		status := "synced"
		rk.s.mu.Lock()
		rk.mu.Lock()
		for _, res := range rk.s.sortedResources("uploaded") {
			if rk.images[res.name+" "+res.arch] {
				images = append(images, map[string]any{"name": "custom/" + res.name, "architecture": strings.SplitN(res.arch, "/", 2)[0],
					"subarches": []string{strings.SplitN(res.arch, "/", 2)[1]}})
			} else if regionHolds(res) {
				status = "out-of-sync"
			}
		}
		rk.mu.Unlock()
		rk.s.mu.Unlock()
		return map[string]any{"connected": rk.State() != RackUnreachable, "status": status, "images": images}
	}
	return map[string]any{"connected": true, "status": "synced", "images": images}
}

func regionHolds(res *resource) bool {
	for _, st := range res.sets {
		for _, f := range st.files {
			if f.verified {
				return true
			}
		}
	}
	return false
}

// importImages copies the region's uploaded images to a 3.4 rack at
// once; a rack that cannot reach its region imports nothing.
func (rk *Rack) importImages() {
	if rk.State() == RackNoRegion {
		return
	}
	rk.s.mu.Lock()
	defer rk.s.mu.Unlock()
	rk.mu.Lock()
	defer rk.mu.Unlock()
	for _, res := range rk.s.sortedResources("uploaded") {
		if regionHolds(res) {
			rk.images[res.name+" "+res.arch] = true
		}
	}
}

// endless reads zeros without end.
type endless struct{}

func (endless) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

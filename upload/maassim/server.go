package maassim

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuaas/imagectl/internal/simfault"
)

// APIPrefix is the path of the MAAS 2.0 API under a server's URL.
const APIPrefix = "/MAAS/api/2.0/"

// Options configure a simulated MAAS.
type Options struct {
	// Version is the MAAS version whose behaviour is simulated: "2.9",
	// "3.4", "3.5", "3.7" or "3.8", or with a patch level where it
	// matters ("3.5" is 3.5.0, "3.5.2"). Default "3.7". Files on disk
	// are named by sha256 on 3.5.0 and 3.5.1 (the API gives no
	// filename_on_disk), by its first 7 digits from 3.5.2.
	Version string
	// Architectures are the usable architectures; default amd64/generic,
	// amd64/hwe-24.04, arm64/generic.
	Architectures []string
	// CompleteAfterGets is, from 3.5 on, how many GETs of a resource still
	// show a fully uploaded file incomplete (its sync to the regions).
	// Default 2; -1 for none.
	CompleteAfterGets int
	// InlineLimit is nginx's client_max_body_size in front of MAAS from 3.2:
	// larger create requests get 413. Default 10 MB.
	InlineLimit int64
	// Now is the server's clock, for OAuth timestamps and set versions.
	Now func() time.Time
	// Hold bounds how long a timeout fault holds a request before closing
	// its connection when the client does not give up. Default 2 minutes.
	Hold time.Duration
	// Latency delays every request before it is handled, as a remote
	// site's round trip would (benchmarks of many sites). Default none.
	Latency time.Duration
	// Racks are the rack controllers, each with a :5248-style server of
	// its own on a loopback address (racks.go). With racks, uploaded
	// bytes are kept on disk (a temporary folder Close removes) for them
	// to serve. Default none.
	Racks []RackSpec
}

// Op is a kind of request, for fault injection and counting.
type Op string

// Request kinds.
const (
	OpList      Op = "list"
	OpGet       Op = "get"
	OpCreate    Op = "create"
	OpDelete    Op = "delete"
	OpChunk     Op = "chunk"      // an upload chunk that does not complete the file
	OpLastChunk Op = "last-chunk" // the chunk that brings the file to its size
)

// FaultKind is what goes wrong.
type FaultKind string

// Faults.
const (
	// Timeout applies the request, then sends nothing until the client
	// gives up (or Options.Hold passes) and closes the connection.
	Timeout FaultKind = "timeout"
	// Unavailable answers 503 without applying the request.
	Unavailable FaultKind = "unavailable"
	// Drop reads half of the request body, then closes the connection
	// without applying or answering it.
	Drop FaultKind = "drop"
	// Corrupt flips a bit of the chunk's first byte as it is stored
	// (chunks only), as a faulty network path or disk would.
	Corrupt FaultKind = "corrupt"
	// Refuse answers Fault.Status (default 400) with Fault.Body as its
	// text, without applying the request: MAAS refusing it in words of
	// its own.
	Refuse FaultKind = "refuse"
)

// Fault is an injected failure for requests of one kind.
type Fault struct {
	On   Op
	Kind FaultKind
	// After lets this many matching requests through first.
	After int
	// Times is how many requests it hits; 0 means 1, -1 means all.
	Times int
	// RetryAfter, for Unavailable, sets the Retry-After header (seconds).
	RetryAfter int
	// Status and Body are Refuse's answer.
	Status int
	Body   string
}

// Server is a running simulated MAAS.
type Server struct {
	// URL is the MAAS root (…/MAAS), as a site's maas_url.
	URL string
	// AdminKey and UserKey are API keys of an admin and of a plain user.
	AdminKey, UserKey string

	opts    Options
	major   int
	minor   int
	patch   int
	hs      *httptest.Server
	closing chan struct{}

	faults *simfault.Faults[Op, Fault]

	mu         sync.Mutex
	tokens     map[string]token // by consumer key + token key
	nonces     map[string]time.Time
	resources  map[int]*resource
	nextID     int
	nextFileID int

	// racks are the rack controllers (racks.go); spoolDir keeps uploaded
	// bytes for them to serve.
	racks    []*Rack
	rackPort int
	spoolDir string
}

type token struct {
	secret string
	admin  bool
}

type resource struct {
	id        int
	rtype     int // 0 synced, 1 generated, 2 uploaded (BOOT_RESOURCE_TYPE)
	name      string
	arch      string
	title     string
	baseImage string
	sets      []*rset
}

type rset struct {
	version string
	label   string
	files   []*rfile
}

type rfile struct {
	id       int
	filename string
	filetype string
	sha256   string
	onDisk   string
	size     int64
	received int64
	h        hash.Hash
	verified bool // all bytes received and the sha256 matched
	stuck    bool // all bytes on disk but the sha256 did not match
	lagGets  int  // GETs left before a verified file shows complete
	// content is the file's bytes, for the racks to serve: kept (spooled,
	// on disk) only when the server has racks, or given by Seed.
	content io.ReaderAt
	spooled *os.File
	// appending serializes the chunks sent to the file: MAAS reads a
	// chunk's body, then appends it at the offset its database counts in
	// a serializable transaction that is retried on conflict, so chunks
	// that arrive together land one after the other, each at the offset
	// of the moment.
	appending sync.Mutex
}

// New starts a simulated MAAS on loopback.
func New(opts Options) *Server {
	if opts.Version == "" {
		opts.Version = "3.7"
	}
	if len(opts.Architectures) == 0 {
		opts.Architectures = []string{"amd64/generic", "amd64/hwe-24.04", "arm64/generic"}
	}
	if opts.CompleteAfterGets == 0 {
		opts.CompleteAfterGets = 2
	}
	if opts.InlineLimit == 0 {
		opts.InlineLimit = 10 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Hold == 0 {
		opts.Hold = 2 * time.Minute
	}
	s := &Server{
		opts:      opts,
		closing:   make(chan struct{}),
		tokens:    map[string]token{},
		nonces:    map[string]time.Time{},
		resources: map[int]*resource{},
		faults:    simfault.New(func(f Fault) simfault.Match[Op] { return simfault.Match[Op]{On: f.On, After: f.After, Times: f.Times} }),
	}
	maj, rest, _ := strings.Cut(opts.Version, ".")
	min, patch, _ := strings.Cut(rest, ".")
	s.major, _ = strconv.Atoi(maj)
	s.minor, _ = strconv.Atoi(min)
	s.patch, _ = strconv.Atoi(patch)
	s.AdminKey = s.newKey(true)
	s.UserKey = s.newKey(false)
	s.seedSynced()
	s.hs = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.hs.URL + "/MAAS"
	if len(opts.Racks) > 0 {
		s.startRacks(opts.Racks)
	}
	return s
}

// Close stops the server and its racks, releasing requests held by
// timeout faults.
func (s *Server) Close() {
	close(s.closing)
	s.hs.CloseClientConnections()
	s.hs.Close()
	s.stopRacks()
}

// Inject adds faults; each hits requests of its kind in order.
func (s *Server) Inject(faults ...Fault) { s.faults.Inject(faults...) }

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() { s.faults.Clear() }

// Count is how many authenticated requests of a kind the server received.
func (s *Server) Count(op Op) int { return s.faults.Count(op) }

// Resource is a snapshot of a boot resource as the server holds it.
type Resource struct {
	ID           int
	Type         string
	Name         string
	Architecture string
	Title        string
	BaseImage    string
	Sets         []Set // oldest first
}

// Set is a snapshot of a resource set.
type Set struct {
	Version string
	Files   []File
}

// File is a snapshot of a resource file: Verified means every byte arrived
// and matched the sha256 (whether or not a GET already shows it complete).
type File struct {
	ID       int
	Filename string
	SHA256   string
	Size     int64
	Received int64
	Verified bool
	Stuck    bool
}

// Resources returns every boot resource, by id.
func (s *Server) Resources() []Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Resource
	for _, r := range s.sortedResources("all") {
		rr := Resource{ID: r.id, Type: typeNames[r.rtype], Name: r.name, Architecture: r.arch, Title: r.title, BaseImage: r.baseImage}
		for _, st := range r.sets {
			ss := Set{Version: st.version}
			for _, f := range st.files {
				ss.Files = append(ss.Files, File{ID: f.id, Filename: f.filename, SHA256: f.sha256, Size: f.size,
					Received: f.received, Verified: f.verified, Stuck: f.stuck})
			}
			rr.Sets = append(rr.Sets, ss)
		}
		out = append(out, rr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

var typeNames = map[int]string{0: "Synced", 1: "Generated", 2: "Uploaded"}

const (
	typeSynced   = 0
	typeUploaded = 2
)

func (s *Server) newKey(admin bool) string {
	part := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)[:n]
	}
	ck, tk, sec := part(18), part(18), part(32)
	s.tokens[ck+":"+tk] = token{secret: sec, admin: admin}
	return ck + ":" + tk + ":" + sec
}

// onDiskNames reports whether the simulated version names files on disk
// by a short filename_on_disk that the API gives (3.5.2 and later);
// 3.5.0 and 3.5.1 name them by their sha256 and the API gives none.
func (s *Server) onDiskNames() bool {
	return s.atLeast(3, 6) || s.major == 3 && s.minor == 5 && s.patch >= 2
}

// fullVersion is the version version/ and the racks answer: "3.5.0"
// for "3.5".
func (s *Server) fullVersion() string {
	if strings.Count(s.opts.Version, ".") >= 2 {
		return s.opts.Version
	}
	return s.opts.Version + ".0"
}

// onDiskName is a file's name on disk from 3.5 (onDiskNames).
func (s *Server) onDiskName(sum string) string {
	if s.onDiskNames() {
		return sum[:7]
	}
	return sum
}

// atLeast reports whether the simulated version is major.minor or later.
func (s *Server) atLeast(major, minor int) bool {
	return s.major > major || s.major == major && s.minor >= minor
}

// syncedNames are the images a fresh MAAS has imported.
var syncedNames = []string{"ubuntu/jammy", "ubuntu/noble"}

func (s *Server) seedSynced() {
	for _, n := range syncedNames {
		s.nextID++
		s.nextFileID++
		f := &rfile{id: s.nextFileID, filename: "squashfs", filetype: "squashfs", size: 1, received: 1, verified: true,
			sha256: strings.Repeat("0", 63) + strconv.Itoa(s.nextFileID%10)}
		s.resources[s.nextID] = &resource{id: s.nextID, rtype: typeSynced, name: n, arch: "amd64/ga-24.04",
			sets: []*rset{{version: "20250101", label: "stable", files: []*rfile{f}}}}
	}
}

var (
	reResource = regexp.MustCompile(`^boot-resources/([0-9]+)/$`)
	reUpload   = regexp.MustCompile(`^boot-resources/([0-9]+)/upload/([0-9]+)/$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.opts.Latency > 0 {
		t := time.NewTimer(s.opts.Latency)
		select {
		case <-t.C:
		case <-s.closing:
			t.Stop()
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	rest, ok := strings.CutPrefix(r.URL.Path, APIPrefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if rest == "version/" && r.Method == http.MethodGet {
		// Anonymous in MAAS.
		s.version(w)
		return
	}
	// nginx answers before MAAS sees the request.
	if r.Method == http.MethodPost && rest == "boot-resources/" && s.atLeast(3, 2) && r.ContentLength > s.opts.InlineLimit {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
		return
	}
	tok, err := s.authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `OAuth realm="OAuth"`)
		textError(w, http.StatusUnauthorized, "Authorization Error: "+err.Error())
		return
	}
	var (
		op           Op
		handle       func(w http.ResponseWriter, r *http.Request, body io.Reader)
		resID, fID   int
		isChunkRoute bool
	)
	switch {
	case rest == "boot-resources/":
		if q := r.URL.Query().Get("op"); q != "" {
			textError(w, http.StatusBadRequest, fmt.Sprintf("Unrecognised signature: method=%s op=%s", r.Method, q))
			return
		}
		switch r.Method {
		case http.MethodGet:
			op, handle = OpList, s.list
		case http.MethodPost:
			op, handle = OpCreate, s.create
		default:
			methodNotAllowed(w, "GET, POST")
			return
		}
	case reResource.MatchString(rest):
		resID, _ = strconv.Atoi(reResource.FindStringSubmatch(rest)[1])
		switch r.Method {
		case http.MethodGet:
			op, handle = OpGet, func(w http.ResponseWriter, r *http.Request, _ io.Reader) { s.get(w, resID) }
		case http.MethodDelete:
			op, handle = OpDelete, func(w http.ResponseWriter, r *http.Request, _ io.Reader) { s.delete(w, resID) }
		default:
			methodNotAllowed(w, "GET, DELETE")
			return
		}
	case reUpload.MatchString(rest):
		m := reUpload.FindStringSubmatch(rest)
		resID, _ = strconv.Atoi(m[1])
		fID, _ = strconv.Atoi(m[2])
		if r.Method != http.MethodPut {
			methodNotAllowed(w, "PUT")
			return
		}
		isChunkRoute = true
		op = OpChunk
		if s.completesFile(resID, fID, r.ContentLength) {
			op = OpLastChunk
		}
	case strings.HasPrefix(rest, "rackcontrollers/") || rest == "fabrics/":
		s.serveRacksAPI(w, r, rest, tok)
		return
	default:
		textError(w, http.StatusNotFound, "Unknown API endpoint: "+r.URL.Path)
		return
	}
	if (op == OpCreate || op == OpDelete || isChunkRoute) && !tok.admin {
		textError(w, http.StatusForbidden, "This method is reserved for admin users.")
		return
	}
	fault, hit := s.faults.Take(op)
	var body io.Reader = r.Body
	if hit {
		switch fault.Kind {
		case Unavailable:
			if fault.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(fault.RetryAfter))
			}
			textError(w, http.StatusServiceUnavailable, "Service Unavailable")
			return
		case Drop:
			if r.ContentLength > 0 {
				_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
			}
			panic(http.ErrAbortHandler)
		case Corrupt:
			body = &flipFirst{r: r.Body}
		case Refuse:
			textError(w, cmp.Or(fault.Status, http.StatusBadRequest), fault.Body)
			return
		}
	}
	if isChunkRoute {
		handle = func(w http.ResponseWriter, r *http.Request, body io.Reader) { s.upload(w, r, body, resID, fID) }
	}
	if hit && fault.Kind == Timeout {
		handle(httptest.NewRecorder(), r, body)
		simfault.Hold(r, s.closing, s.opts.Hold)
	}
	handle(w, r, body)
}

type flipFirst struct {
	r    io.Reader
	done bool
}

func (f *flipFirst) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && !f.done {
		p[0] ^= 0x01
		f.done = true
	}
	return n, err
}

func textError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, msg)
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	textError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
}

func validationError(w http.ResponseWriter, errs map[string][]string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(errs)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

//lint:file-ignore ST1005 authenticate's errors are MAAS's own response texts, capitals included.

// authenticate checks the OAuth PLAINTEXT header as MAAS does.
func (s *Server) authenticate(r *http.Request) (token, error) {
	h := r.Header.Get("Authorization")
	params, ok := strings.CutPrefix(h, "OAuth ")
	if !ok {
		return token{}, fmt.Errorf("no OAuth Authorization header")
	}
	p := map[string]string{}
	for _, kv := range strings.Split(params, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return token{}, fmt.Errorf("malformed OAuth parameter %q", kv)
		}
		uv, err := url.QueryUnescape(strings.Trim(v, `"`))
		if err != nil {
			return token{}, fmt.Errorf("malformed OAuth parameter %q", k)
		}
		p[k] = uv
	}
	if p["oauth_signature_method"] != "PLAINTEXT" {
		return token{}, fmt.Errorf("Invalid signature method: %q", p["oauth_signature_method"])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.tokens[p["oauth_consumer_key"]+":"+p["oauth_token"]]
	if !ok {
		return token{}, fmt.Errorf("Invalid access token: %s", p["oauth_token"])
	}
	if p["oauth_signature"] != "&"+tok.secret {
		return token{}, fmt.Errorf("Invalid signature")
	}
	ts, err := strconv.ParseInt(p["oauth_timestamp"], 10, 64)
	if err != nil {
		return token{}, fmt.Errorf("Missing or invalid timestamp")
	}
	now := s.opts.Now().Unix()
	if d := now - ts; d > 300 || d < -300 {
		return token{}, fmt.Errorf("Expired timestamp: given %d and now %d has a greater difference than threshold 300", ts, now)
	}
	nonce := p["oauth_nonce"]
	if nonce == "" {
		return token{}, fmt.Errorf("Missing nonce")
	}
	key := p["oauth_consumer_key"] + ":" + p["oauth_token"] + ":" + nonce
	if _, used := s.nonces[key]; used {
		return token{}, fmt.Errorf("Nonce already used: %s", nonce)
	}
	for k, t := range s.nonces {
		if now-t.Unix() > 600 {
			delete(s.nonces, k)
		}
	}
	s.nonces[key] = time.Unix(ts, 0)
	return tok, nil
}

// completesFile reports whether n more bytes bring the file to its size.
func (s *Server) completesFile(resID, fileID int, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, f := s.findFile(resID, fileID)
	return f != nil && !f.verified && !f.stuck && n > 0 && f.received+n == f.size
}

func (s *Server) findFile(resID, fileID int) (*resource, *rfile) {
	r := s.resources[resID]
	if r == nil {
		return nil, nil
	}
	for _, st := range r.sets {
		for _, f := range st.files {
			if f.id == fileID {
				return r, f
			}
		}
	}
	return r, nil
}

func (s *Server) sortedResources(typ string) []*resource {
	var out []*resource
	for _, r := range s.resources {
		if typ == "all" || typ == "synced" && r.rtype == typeSynced || typ == "uploaded" && r.rtype == typeUploaded {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if typ == "all" && a.rtype != b.rtype {
			return a.rtype < b.rtype
		}
		if a.name != b.name {
			return a.name < b.name
		}
		return a.arch < b.arch
	})
	return out
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, _ io.Reader) {
	typ := "all"
	if q := r.URL.Query(); q.Has("type") {
		typ = q.Get("type")
	}
	if typ != "all" && typ != "synced" && typ != "uploaded" {
		textError(w, http.StatusBadRequest, fmt.Sprintf("'%s' is not a valid boot resource type. Available types: ['synced', 'uploaded']", typ))
		return
	}
	s.mu.Lock()
	out := []map[string]any{}
	for _, res := range s.sortedResources(typ) {
		out = append(out, s.resourceDict(res, false))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) get(w http.ResponseWriter, id int) {
	s.mu.Lock()
	res := s.resources[id]
	if res == nil {
		s.mu.Unlock()
		textError(w, http.StatusNotFound, "No BootResource matches the given query.")
		return
	}
	d := s.resourceDict(res, true)
	// The sync to the regions moves on with every look.
	for _, st := range res.sets {
		for _, f := range st.files {
			if f.verified && f.lagGets > 0 {
				f.lagGets--
			}
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) delete(w http.ResponseWriter, id int) {
	s.mu.Lock()
	_, ok := s.resources[id]
	delete(s.resources, id)
	s.mu.Unlock()
	if !ok {
		textError(w, http.StatusNotFound, "No BootResource matches the given query.")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) resourceDict(r *resource, withSets bool) map[string]any {
	d := map[string]any{
		"id": r.id, "type": typeNames[r.rtype], "name": r.name, "architecture": r.arch,
		"resource_uri": fmt.Sprintf("%sboot-resources/%d/", APIPrefix, r.id), "last_deployed": nil,
		"subarches": strings.SplitN(r.arch, "/", 2)[1],
	}
	if r.rtype == typeUploaded {
		d["title"] = r.title
	}
	if r.baseImage != "" && s.atLeast(3, 5) {
		d["base_image"] = r.baseImage
	}
	if !withSets {
		return d
	}
	sets := map[string]any{}
	for _, st := range r.sets {
		var size, recv int64
		complete := true
		files := map[string]any{}
		for _, f := range st.files {
			fd := map[string]any{"filename": f.filename, "filetype": f.filetype, "sha256": f.sha256, "size": f.size}
			if s.onDiskNames() {
				fd["filename_on_disk"] = f.onDisk
			}
			fc := f.verified && f.lagGets == 0
			fd["complete"] = fc
			if !fc {
				fd["progress"] = progress(f.received, f.size)
				if r.rtype == typeUploaded {
					fd["upload_uri"] = fmt.Sprintf("%sboot-resources/%d/upload/%d/", APIPrefix, r.id, f.id)
				}
			}
			complete = complete && fc
			size += f.size
			recv += f.received
			files[f.filename] = fd
		}
		sd := map[string]any{"version": st.version, "label": st.label, "size": size, "complete": complete, "files": files}
		if !complete {
			sd["progress"] = progress(recv, size)
		}
		sets[st.version] = sd
	}
	d["sets"] = sets
	return d
}

func progress(done, total int64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(done) / float64(total)
}

// upload appends one chunk, as BootResourceFileUploadHandler.update does.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, body io.Reader, resID, fileID int) {
	s.mu.Lock()
	res, f := s.findFile(resID, fileID)
	if res == nil || f == nil {
		s.mu.Unlock()
		textError(w, http.StatusNotFound, "No BootResource matches the given query.")
		return
	}
	s.mu.Unlock()
	// Django reads Content-Length; a chunked request has none.
	size := r.ContentLength
	if size <= 0 {
		textError(w, http.StatusBadRequest, "Missing data.")
		return
	}
	f.appending.Lock()
	defer f.appending.Unlock()
	s.mu.Lock()
	if res.rtype != typeUploaded {
		s.mu.Unlock()
		textError(w, http.StatusForbidden, fmt.Sprintf("Cannot upload to a resource of type: %d.", res.rtype))
		return
	}
	if f.verified || (!f.stuck && f.received == f.size) {
		s.mu.Unlock()
		textError(w, http.StatusBadRequest, "Cannot upload to a complete file.")
		return
	}
	// The bytes go to a copy of the hash state: a short body changes nothing.
	state, _ := f.h.(encoding.BinaryMarshaler).MarshalBinary()
	offset, stuck := f.received, f.stuck
	s.mu.Unlock()

	h := sha256.New()
	_ = h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state)
	var dst io.Writer = h
	if f.spooled != nil {
		// Kept for the racks to serve: written at the offset of the
		// moment, as MAAS writes its file.
		dst = io.MultiWriter(h, io.NewOffsetWriter(f.spooled, offset))
	}
	n, err := io.Copy(dst, io.LimitReader(body, size))
	if err != nil || n != size {
		textError(w, http.StatusBadRequest, "Content-Length doesn't equal size of received data.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, cur := s.findFile(resID, fileID); cur != f {
		textError(w, http.StatusNotFound, "No BootResource matches the given query.")
		return
	}
	if stuck || f.received != offset || offset+size > f.size {
		// The bytes are on disk beyond what the database counts (or, with
		// another client's chunks before them, beyond the file's size).
		textError(w, http.StatusBadRequest, "Too much data received.")
		return
	}
	if offset+size < f.size {
		f.h, f.received = h, offset+size
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "OK")
		return
	}
	// The last byte: hash the file. A mismatch rolls the transaction back
	// but leaves the bytes on disk, so the file is stuck.
	if hex.EncodeToString(h.Sum(nil)) != f.sha256 {
		f.stuck = true
		textError(w, http.StatusBadRequest, "Saved content does not match given SHA256 value.")
		return
	}
	f.h, f.received, f.verified = h, f.size, true
	if s.atLeast(3, 5) && s.opts.CompleteAfterGets > 0 {
		f.lagGets = s.opts.CompleteAfterGets
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "OK")
}

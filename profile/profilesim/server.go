// Package profilesim is an in-process fake of the GPUaaS admin API's MAAS
// site profile endpoint, for tests, used like net/http/httptest: New starts
// it on loopback, URL is its base URL, Token the bearer token it takes,
// Close stops it.
//
// It follows the endpoint as operators call it with curl: GET and PATCH of
// /api/v1/admin/maas-sites/{site}/profiles/{profile}, a bearer token
// (401 without it), a JSON body whose distro_series is set (Content-Type
// application/json, else 415), and an X-Idempotency-Key a PATCH must
// carry. A key seen before with the same body gets the first answer again
// without being applied again; with another body, 422. A profile is JSON
// with more fields than distro_series, as a real one would be.
//
// Inject adds failures per method (internal/simfault schedules them): 401,
// 403, 409 with a message, 503 (with Retry-After), and a timeout after the
// request was applied (the answer never comes: the connection is held
// until the client gives up).
package profilesim

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuaas/imagectl/internal/simfault"
)

// Op is a kind of request, for fault injection and counting.
type Op string

// Request kinds.
const (
	OpGet   Op = "GET"
	OpPatch Op = "PATCH"
)

// FaultKind is what goes wrong.
type FaultKind string

// Faults.
const (
	// Unauthorized answers 401 whatever the token.
	Unauthorized FaultKind = "unauthorized"
	// Forbidden answers 403.
	Forbidden FaultKind = "forbidden"
	// Conflict answers 409 with Fault.Message, applying nothing.
	Conflict FaultKind = "conflict"
	// Unavailable answers 503, applying nothing.
	Unavailable FaultKind = "unavailable"
	// TimeoutAfterAccept applies the request, then sends nothing until the
	// client gives up (or Options.Hold passes) and closes the connection.
	TimeoutAfterAccept FaultKind = "timeout-after-accept"
)

// Fault is an injected failure for requests of one kind.
type Fault struct {
	On   Op
	Kind FaultKind
	// After lets this many matching requests through first.
	After int
	// Times is how many requests it hits; 0 means 1, -1 means all.
	Times int
	// Message is the 409's error message. With Error, the 409 is
	// {"error": Error, "message": Message}, as an API that names the
	// conflict and explains it answers; without, {"error": Message}.
	Message string
	Error   string
	// RetryAfter, for Unavailable, sets the Retry-After header (seconds).
	RetryAfter int
}

// Options configure a fake admin API.
type Options struct {
	// Token is the bearer token it accepts; default a random-looking one.
	Token string
	// Hold bounds how long a timeout fault holds a request when the client
	// does not give up. Default 1 minute.
	Hold time.Duration
}

// Request is a request the server received (authenticated or not).
type Request struct {
	Method, Path   string
	IdempotencyKey string
	Body           string
	// Authorized: it carried the right bearer token.
	Authorized bool
}

type profile struct {
	id, site     string
	distroSeries string
	updated      int
}

type replay struct {
	body   string
	status int
	answer []byte
}

// Server is a running fake admin API.
type Server struct {
	// URL is the API's base URL (http://127.0.0.1:port).
	URL string
	// Token is the bearer token it takes.
	Token string

	opts    Options
	hs      *httptest.Server
	closing chan struct{}

	faults *simfault.Faults[Op, Fault]

	mu       sync.Mutex
	profiles map[string]*profile // by site + "/" + profile
	keys     map[string]replay
	requests []Request
}

// Prefix is the path the profiles are under.
const Prefix = "/api/v1/admin/maas-sites/"

// New starts a fake admin API on loopback with no profiles.
func New(opts Options) *Server {
	if opts.Token == "" {
		opts.Token = "gpuaas-admin-SECRET-token-0123456789"
	}
	if opts.Hold <= 0 {
		opts.Hold = time.Minute
	}
	s := &Server{Token: opts.Token, opts: opts, closing: make(chan struct{}), profiles: map[string]*profile{},
		keys: map[string]replay{}, faults: simfault.New(func(f Fault) simfault.Match[Op] { return simfault.Match[Op]{On: f.On, After: f.After, Times: f.Times} })}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.hs.URL
	return s
}

// Close stops the server, releasing held requests.
func (s *Server) Close() {
	close(s.closing)
	s.hs.CloseClientConnections()
	s.hs.Close()
}

// SetProfile creates a profile or sets its distro_series, as an operator
// with the UI would (nothing is counted).
func (s *Server) SetProfile(siteID, profileID, distroSeries string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.profiles[siteID+"/"+profileID]
	if p == nil {
		p = &profile{id: profileID, site: siteID}
		s.profiles[siteID+"/"+profileID] = p
	}
	p.distroSeries = distroSeries
	p.updated++
}

// DistroSeries is a profile's distro_series; false when there is no such
// profile.
func (s *Server) DistroSeries(siteID, profileID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.profiles[siteID+"/"+profileID]
	if p == nil {
		return "", false
	}
	return p.distroSeries, true
}

// Inject adds faults; each hits requests of its kind in order.
func (s *Server) Inject(faults ...Fault) { s.faults.Inject(faults...) }

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() { s.faults.Clear() }

// Count is how many authorized requests of a kind reached the profiles.
func (s *Server) Count(op Op) int { return s.faults.Count(op) }

// Requests are every request received, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (p *profile) json() map[string]any {
	return map[string]any{
		"id": p.id, "site_id": p.site, "name": "profile " + p.id, "distro_series": p.distroSeries,
		"deploy_user": "hpcadmin", "site_bootstrap_bundle_ref": "maas-site-bootstrap-h200-ib",
		"tags": []string{"gpuaas-profile"}, "revision": p.updated,
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	authorized := r.Header.Get("Authorization") == "Bearer "+s.Token
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, IdempotencyKey: r.Header.Get("X-Idempotency-Key"),
		Body: string(body), Authorized: authorized})
	s.mu.Unlock()

	if !authorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gpuaas-admin"`)
		jsonError(w, http.StatusUnauthorized, "missing or invalid bearer token")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	site, prof, ok2 := strings.Cut(rest, "/profiles/")
	if !ok || !ok2 || site == "" || prof == "" || strings.Contains(site, "/") || strings.Contains(prof, "/") {
		jsonError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
		return
	}
	var op Op
	switch r.Method {
	case http.MethodGet:
		op = OpGet
	case http.MethodPatch:
		op = OpPatch
	default:
		w.Header().Set("Allow", "GET, PATCH")
		jsonError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	fault, hit := s.faults.Take(op)
	if hit {
		switch fault.Kind {
		case Unauthorized:
			jsonError(w, http.StatusUnauthorized, "token expired")
			return
		case Forbidden:
			jsonError(w, http.StatusForbidden, "this token may not edit MAAS site profiles")
			return
		case Conflict:
			if fault.Error != "" {
				writeJSON(w, http.StatusConflict, map[string]string{"error": fault.Error, "message": fault.Message})
				return
			}
			jsonError(w, http.StatusConflict, fault.Message)
			return
		case Unavailable:
			if fault.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(fault.RetryAfter))
			}
			jsonError(w, http.StatusServiceUnavailable, "service unavailable")
			return
		}
	}
	status, answer := s.handle(r, op, site, prof, body)
	if hit && fault.Kind == TimeoutAfterAccept {
		// Applied; the answer never comes.
		simfault.Hold(r, s.closing, s.opts.Hold)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(answer)
}

// handle applies a request to the profiles and returns the answer.
func (s *Server) handle(r *http.Request, op Op, site, prof string, body []byte) (int, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	errBody := func(msg string) []byte { b, _ := json.Marshal(map[string]string{"error": msg}); return b }
	p := s.profiles[site+"/"+prof]
	if p == nil {
		return http.StatusNotFound, errBody(fmt.Sprintf("MAAS site %q has no profile %q", site, prof))
	}
	if op == OpGet {
		b, _ := json.Marshal(p.json())
		return http.StatusOK, b
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return http.StatusUnsupportedMediaType, errBody("Content-Type must be application/json")
	}
	key := r.Header.Get("X-Idempotency-Key")
	if key == "" {
		return http.StatusBadRequest, errBody("X-Idempotency-Key is required")
	}
	if prev, seen := s.keys[key]; seen {
		if prev.body != string(body) {
			return http.StatusUnprocessableEntity, errBody("X-Idempotency-Key was used with another request")
		}
		return prev.status, prev.answer
	}
	var patch map[string]any
	if err := json.Unmarshal(body, &patch); err != nil {
		return http.StatusBadRequest, errBody("the body is not a JSON object")
	}
	ds, ok := patch["distro_series"].(string)
	if !ok || ds == "" {
		return http.StatusUnprocessableEntity, errBody("distro_series must be a non-empty string")
	}
	p.distroSeries = ds
	p.updated++
	b, _ := json.Marshal(p.json())
	s.keys[key] = replay{body: string(body), status: http.StatusOK, answer: b}
	return http.StatusOK, b
}

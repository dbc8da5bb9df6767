package racks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuaas/imagectl/internal/backoff"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/klauspost/readahead"
)

// Verdict is what the check says of a rack, or of all of them.
type Verdict string

// Verdicts. Unknown is never counted as passed.
const (
	Passed  Verdict = "passed"
	Failed  Verdict = "failed"
	Unknown Verdict = "unknown"
)

// Target is the version the racks must serve: its boot resource's name
// (with or without "custom/") and architecture at the site's MAAS, and
// the sha256 and size its bytes must have.
type Target struct {
	Name         string
	Architecture string
	SHA256       string
	Size         int64
	// Local, when not nil, reads the version's bytes on this host (the
	// store's tgz). The check then compares each rack's stream with them
	// byte for byte instead of hashing every stream, and hashes them
	// once, against SHA256 and Size, while the racks serve: bytes equal
	// to bytes of that sha256 have it, and comparing costs a small part
	// of what hashing does, so a rack's stream is no longer bound by one
	// core's sha256 (docs/speed.md). A rack that differs is still named
	// with the sha256 of what it served. A local copy that is not the
	// version makes the check an error.
	Local io.ReaderAt
	// LocalHashed says the caller knows Local holds the version: it was
	// hashed before and has not changed since (internal/hashstamp). It
	// is not hashed again, so the racks' streams are bound by nothing
	// but comparing, and the check is only as sure as the caller: a rack
	// that serves Local's bytes passes. A rack that serves the version
	// with other bytes, or a read of Local that fails, proves the caller
	// wrong and makes the check an error.
	LocalHashed bool
}

// Options adjust a check.
type Options struct {
	// Parallel is how many racks are checked at once (default 4); each
	// rack gets one fetch at a time.
	Parallel int
	// Timeout bounds the whole check (default 30 min): a rack that was
	// connected to but had not served it all by then fails; one not
	// reached, or not started, is unknown.
	Timeout time.Duration
	// StallTimeout is how long a rack may send nothing, neither its
	// response's headers nor a byte of its body, while the check waits
	// for it, before it fails as reachable but not serving (default 60 s):
	// a stalled rack gives its slot back rather than holding it for the
	// whole check. The time the check holds the stream itself (a slow
	// disk under the local copy, the convoy) is not the rack's.
	StallTimeout time.Duration
	// Port is the racks' image port (default 5248).
	Port int
	// ImportTimeout bounds the wait, on MAAS 3.4, for a rack to list the
	// image after it was asked to import it (default 10 min), polled every
	// PollInterval (default 2 s).
	ImportTimeout, PollInterval time.Duration
	// EachHashed hashes each rack's stream on its own when there is no
	// local copy, instead of comparing the racks' streams with each other
	// and hashing their bytes once (convoy): what make bench measures the
	// comparison against. A check is as sure either way.
	EachHashed bool
	// Transport carries the fetches; default a clone of
	// http.DefaultTransport without a proxy (machines fetch from the rack
	// directly). Compression is always off: the bytes are checked as they
	// come.
	Transport http.RoundTripper
	// Now is the clock the results are stamped with; time.Now when nil.
	Now func() time.Time
	// Progress, when set, receives each rack's result as it ends, one
	// call at a time.
	Progress func(Rack)
}

// DefaultPort is where a rack serves images to deploying machines.
const DefaultPort = 5248

// Report is what the check found at one MAAS.
type Report struct {
	MAASVersion  string `json:"maas_version"`
	Name         string `json:"name"`
	Architecture string `json:"architecture"`
	SHA256       string `json:"sha256"`
	Size         int64  `json:"size"`
	// Path is what each rack was asked for, after its address and port.
	Path string `json:"path"`
	// ComparedWithLocalCopy is set when each rack's bytes were compared
	// with a local copy of the version, hashed once (Target.Local),
	// rather than each hashed.
	ComparedWithLocalCopy bool `json:"compared_with_local_copy,omitempty"`
	// LocalCopyHashedBefore is set when that copy was not hashed by this
	// check, known unchanged since an earlier one did (Target.LocalHashed).
	LocalCopyHashedBefore bool `json:"local_copy_hashed_before,omitempty"`
	// ComparedWithEachOther is set when, without a local copy, each
	// rack's bytes were compared with the same bytes the first rack to
	// reach them served, those hashed once (the convoy), rather than each
	// rack's hashed: with two racks or more checked at once, unless
	// Options.EachHashed. A rack whose bytes differ, or that fell too far
	// behind the others, is still hashed on its own from there.
	ComparedWithEachOther bool    `json:"compared_with_each_other,omitempty"`
	Racks                 []Rack  `json:"racks"`
	Verdict               Verdict `json:"verdict"`
}

// Rack is one rack controller's result.
type Rack struct {
	SystemID string `json:"system_id"`
	Hostname string `json:"hostname"`
	// Addresses are those machines use to reach it (on the VLANs where
	// it serves DHCP, else all it has), in the order tried.
	Addresses []string `json:"addresses"`
	// Services are its services' statuses, by name.
	Services map[string]string `json:"services,omitempty"`
	// URL is what was fetched (at the address that answered).
	URL     string  `json:"url,omitempty"`
	Verdict Verdict `json:"verdict"`
	// Detail says why it failed or is unknown, or what passed.
	Detail string `json:"detail"`
	Status int    `json:"status,omitempty"`
	// Bytes and SHA256 are what it served.
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256,omitempty"`
	// Cache is its X-Cache answer: "hit" (it had it), "miss" (it filled
	// its cache now), or "" (served from a local disk, or MAAS 3.4).
	Cache string `json:"cache,omitempty"`
	// Duration is its fetch's, from the request to the last byte, and
	// BytesPerSecond its bytes over it. Held is the part of it the
	// check held the rack's stream back for a slower rack (at most half
	// of it plus 100 ms, when the racks are compared with each
	// other: the convoy).
	Duration       time.Duration `json:"duration_ns"`
	BytesPerSecond float64       `json:"bytes_per_second"`
	Held           time.Duration `json:"held_ns,omitempty"`
	At             time.Time     `json:"at"`
	// awaitsLocal is set on a rack that served the local copy's bytes
	// before the copy's own hash ended: it passes when the hash says the
	// copy is the version (awaitLocal), out of its --parallel slot, and
	// note is what its Detail says of its services then.
	awaitsLocal bool
	note        string
}

// Check proves that every rack controller of the MAAS c talks to serves
// t, warming their caches as it goes. It returns an error when it cannot
// say anything of the racks (MAAS cannot be read, holds no complete copy
// of t, holds other bytes, or lists no rack), and ctx's error when ctx
// ends; otherwise the report, whose Verdict is Failed when a rack failed,
// else Unknown when one could not be reached, else Passed.
func Check(ctx context.Context, c *maas.Client, t Target, o Options) (*Report, error) {
	o = o.withDefaults()
	doing := fmt.Sprintf("checking that the racks of %s serve %s", c.URL(), t.Name)
	version, err := c.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, err)
	}
	res, err := c.Find(ctx, t.Name, t.Architecture)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, err)
	}
	if res == nil {
		return nil, fmt.Errorf("%s: MAAS holds no boot resource %s for %s", doing, t.Name, t.Architecture)
	}
	f, err := completeFile(res)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, err)
	}
	if f.SHA256 != t.SHA256 || f.Size != t.Size {
		return nil, fmt.Errorf("%s: MAAS holds other bytes under that name: sha256 %s, %d bytes; want %s, %d bytes",
			doing, f.SHA256, f.Size, t.SHA256, t.Size)
	}
	rep := &Report{MAASVersion: version, Name: res.Name, Architecture: res.Architecture, SHA256: t.SHA256, Size: t.Size,
		Path: imagePath(version, res, f), ComparedWithLocalCopy: t.Local != nil,
		LocalCopyHashedBefore: t.Local != nil && t.LocalHashed}
	controllers, err := c.RackControllers(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, err)
	}
	if len(controllers) == 0 {
		return nil, fmt.Errorf("%s: MAAS lists no rack controller", doing)
	}
	// The fabrics say where a rack serves DHCP; without them, the VLANs
	// its links carry say it.
	fabrics, err := c.Fabrics(ctx)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	vlans := map[int]maas.VLAN{}
	for _, fb := range fabrics {
		for _, v := range fb.VLANs {
			vlans[v.ID] = v
		}
	}

	tctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var local *localCopy
	var conv *convoy
	switch {
	case t.Local != nil && t.LocalHashed:
		local = hashedBefore(t)
	case t.Local != nil:
		local = hashLocal(tctx, t)
	case !o.EachHashed && min(o.Parallel, len(controllers)) > 1:
		conv = newConvoy(tctx, t.Size)
		rep.ComparedWithEachOther = true
	}
	rep.Racks = make([]Rack, len(controllers))
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, rc := range controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			notStarted := func() {
				r := rackOf(rc, vlans)
				r.Verdict, r.At = Unknown, o.Now().UTC()
				r.Detail = fmt.Sprintf("rack %s: not started: the check's timeout of %v ran out while other racks were checked (%d at a time): raise --timeout or --parallel",
					r.Hostname, o.Timeout, o.Parallel)
				rep.Racks[i] = r
				if o.Progress != nil {
					mu.Lock()
					o.Progress(r)
					mu.Unlock()
				}
			}
			select {
			case sem <- struct{}{}:
			case <-tctx.Done():
				notStarted()
				return
			}
			if tctx.Err() != nil {
				<-sem
				notStarted()
				return
			}
			r := o.checkRack(tctx, c, version, res, rep.Path, rc, vlans, t, local, conv)
			// The slot goes to the next rack before this one waits for
			// the local copy's hash: its fetch is over. (A stream of a
			// convoy waited for the convoy's hash in fetch: the hasher
			// lags the first racks only.)
			<-sem
			if r.awaitsLocal {
				r = awaitLocal(tctx, r, local)
			}
			rep.Racks[i] = r
			if o.Progress != nil {
				mu.Lock()
				o.Progress(r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if conv != nil {
		conv.stop()
	}
	if local != nil {
		// It reads t.Local, which the caller closes after: wait for it
		// (when ctx ended, it stops at its next MiB).
		<-local.done
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if local != nil {
		if local.err != nil {
			return nil, fmt.Errorf("%s: %w", doing, local.err)
		}
		if err := local.broken(); t.LocalHashed && err != nil {
			return nil, fmt.Errorf("%s: the local copy was said to have been hashed before, but %w", doing, err)
		}
	}
	slices.SortFunc(rep.Racks, func(a, b Rack) int { return strings.Compare(a.Hostname, b.Hostname) })
	rep.Verdict = Overall(rep.Racks)
	return rep, nil
}

// Overall is the verdict of racks together: Passed only when every rack
// passed, Failed when one failed, else Unknown (one unknown, or a verdict
// that is none of them).
func Overall(rs []Rack) Verdict {
	v := Passed
	for _, r := range rs {
		switch r.Verdict {
		case Passed:
		case Failed:
			return Failed
		default:
			v = Unknown
		}
	}
	if len(rs) == 0 {
		return Unknown
	}
	return v
}

func (o Options) withDefaults() Options {
	if o.Parallel < 1 {
		o.Parallel = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 60 * time.Second
	}
	if o.ImportTimeout <= 0 {
		o.ImportTimeout = 10 * time.Minute
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 2 * time.Second
	}
	if o.Transport == nil {
		// Straight to the rack, as a deploying machine fetches: no proxy
		// from the environment in between.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		o.Transport = tr
	}
	if tr, ok := o.Transport.(*http.Transport); ok && (!tr.DisableCompression || tr.ResponseHeaderTimeout == 0) {
		tr = tr.Clone()
		tr.DisableCompression = true
		if tr.ResponseHeaderTimeout == 0 {
			tr.ResponseHeaderTimeout = o.StallTimeout
		}
		o.Transport = tr
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// completeFile is the file of the resource's newest complete set with
// files (uploads without keep_old leave older sets empty).
func completeFile(res *maas.Resource) (maas.File, error) {
	var best *maas.Set
	for _, s := range res.Sets {
		if !s.Complete || len(s.Files) == 0 {
			continue
		}
		if best == nil || maas.VersionLess(best.Version, s.Version) {
			best = &s
		}
	}
	if best == nil {
		return maas.File{}, fmt.Errorf("MAAS does not hold boot resource %s complete yet (from 3.5, complete means in every region)", res.Name)
	}
	names := make([]string, 0, len(best.Files))
	for n := range best.Files {
		names = append(names, n)
	}
	slices.Sort(names)
	return best.Files[names[0]], nil
}

// imagePath is the path curtin fetches the image with, after the rack's
// address and port: from 3.5.2 the first segment is the file's name on
// disk (3.5.0 and 3.5.1 give none: its sha256), on 3.4 there is none.
func imagePath(version string, res *maas.Resource, f maas.File) string {
	arch, sub, _ := strings.Cut(res.Architecture, "/")
	series := strings.TrimPrefix(res.Name, "custom/")
	rest := fmt.Sprintf("custom/%s/%s/%s/uploaded/%s", url.PathEscape(arch), url.PathEscape(sub), url.PathEscape(series), url.PathEscape(f.Filename))
	if !maas.AtLeast(version, 3, 5, 0) {
		return "/images/" + rest
	}
	key := f.FilenameOnDisk
	if key == "" {
		key = f.SHA256
	}
	return "/images/" + url.PathEscape(key) + "/" + rest
}

// rackOf is a rack's result before its fetch: its name, machine-facing
// addresses and services.
func rackOf(rc maas.RackController, vlans map[int]maas.VLAN) Rack {
	r := Rack{SystemID: rc.SystemID, Hostname: rc.Hostname, Services: map[string]string{}}
	if r.Hostname == "" {
		r.Hostname = rc.SystemID
	}
	for _, ifc := range rc.Interfaces {
		for _, l := range ifc.Links {
			if l.IPAddress == "" || l.Subnet == nil {
				continue
			}
			v, ok := vlans[l.Subnet.VLAN.ID]
			if !ok {
				v = l.Subnet.VLAN
			}
			if v.DHCPOn && (v.PrimaryRack == rc.SystemID || v.SecondaryRack == rc.SystemID) && !slices.Contains(r.Addresses, l.IPAddress) {
				r.Addresses = append(r.Addresses, l.IPAddress)
			}
		}
	}
	if len(r.Addresses) == 0 {
		r.Addresses = append(r.Addresses, rc.IPAddresses...)
	}
	for _, s := range rc.Services {
		r.Services[s.Name] = s.Status
	}
	return r
}

// requiredServices are the services a rack needs running to serve
// images: from 3.5 the agent's proxy fills the cache.
func requiredServices(version string) []string {
	if maas.AtLeast(version, 3, 5, 0) {
		return []string{"rackd", "http", "agent"}
	}
	return []string{"rackd", "http"}
}

func (o Options) checkRack(ctx context.Context, c *maas.Client, version string, res *maas.Resource, path string,
	rc maas.RackController, vlans map[int]maas.VLAN, t Target, local *localCopy, conv *convoy) (r Rack) {
	r = rackOf(rc, vlans)
	r.At = o.Now().UTC()
	// Only a service MAAS says is dead or off fails the rack unfetched;
	// degraded, unknown or unlisted ones may still serve: the bytes say.
	var notes []string
	for _, name := range requiredServices(version) {
		switch st := r.Services[name]; st {
		case "running":
		case "dead", "off":
			r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s: its %s service is %s, not running: it cannot serve images", r.Hostname, name, st)
			return r
		default:
			notes = append(notes, fmt.Sprintf("its %s service is %s", name, orNone(st)))
		}
	}
	if len(notes) > 0 {
		defer func() {
			note := "; note: MAAS says " + strings.Join(notes, ", ")
			switch {
			case r.awaitsLocal:
				r.note = note
			case r.Verdict != "":
				r.Detail += note
			}
		}()
	}
	if len(r.Addresses) == 0 {
		r.Verdict, r.Detail = Unknown, fmt.Sprintf("rack %s: MAAS lists no address for it", r.Hostname)
		return r
	}
	if !maas.AtLeast(version, 3, 5, 0) {
		if done, ok := o.imported(ctx, c, res, &r); !ok {
			return done
		}
	}
	return o.fetch(ctx, r, version, path, t, local, conv)
}

// imported makes sure a 3.4 rack holds the image (its own list), asking
// it to import when it does not and waiting until it lists it; ok false
// with the rack's result when it cannot.
func (o Options) imported(ctx context.Context, c *maas.Client, res *maas.Resource, r *Rack) (Rack, bool) {
	wctx, cancel := context.WithTimeout(ctx, o.ImportTimeout)
	defer cancel()
	asked := false
	for {
		imgs, err := c.RackBootImages(wctx, r.SystemID)
		if err != nil {
			if ctx.Err() != nil {
				return o.timedOut(*r, ctx.Err()), false
			}
			if wctx.Err() != nil {
				r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s does not hold %s %v after it was asked to import it", r.Hostname, res.Name, o.ImportTimeout)
				return *r, false
			}
			r.Verdict, r.Detail = Unknown, fmt.Sprintf("rack %s: reading its image list: %v", r.Hostname, err)
			return *r, false
		}
		if holds(imgs, res) {
			return *r, true
		}
		if !asked {
			if err := c.ImportRackBootImages(wctx, r.SystemID); err != nil {
				r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s does not hold %s (its images are %s): %v", r.Hostname, res.Name, imgs.Status, err)
				return *r, false
			}
			asked = true
		}
		if err := backoff.Sleep(wctx, o.PollInterval); err != nil {
			if ctx.Err() != nil {
				return o.timedOut(*r, ctx.Err()), false
			}
			r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s does not hold %s %v after it was asked to import it (its images are %s)",
				r.Hostname, res.Name, o.ImportTimeout, imgs.Status)
			return *r, false
		}
	}
}

// holds reports whether a 3.4 rack's list names the resource (with or
// without custom/) for its architecture.
func holds(imgs *maas.RackImages, res *maas.Resource) bool {
	arch, sub, _ := strings.Cut(res.Architecture, "/")
	for _, im := range imgs.Images {
		if !manifest.SameName(im.Name, res.Name) {
			continue
		}
		if im.Architecture == res.Architecture || im.Architecture == arch && (len(im.Subarches) == 0 || slices.Contains(im.Subarches, sub)) {
			return true
		}
	}
	return false
}

// timedOut is a rack's result when the check's time ran out (or ctx
// ended) before its fetch did.
func (o Options) timedOut(r Rack, err error) Rack {
	r.Verdict = Unknown
	r.Detail = fmt.Sprintf("rack %s: not checked to the end within the check's timeout of %v", r.Hostname, o.Timeout)
	if r.At.IsZero() {
		r.At = o.Now().UTC()
	}
	return r
}

// fetch GETs the image from the rack's first address that answers, as
// curtin does: no Range, every byte compared with the local copy when
// there is one, else checked in the convoy when there is one, else read
// through sha256, and counted, never more than the version's size. A
// rack that sends nothing for StallTimeout, or is connected to when the
// check's time runs out, fails: it is reachable but not serving.
func (o Options) fetch(ctx context.Context, r Rack, version, path string, t Target, local *localCopy, conv *convoy) Rack {
	client := &http.Client{Transport: o.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var unreachable []string
	for _, addr := range r.Addresses {
		u := "http://" + net.JoinHostPort(addr, strconv.Itoa(o.Port)) + path
		var connected, stalled atomic.Bool
		fctx, cancel := context.WithCancel(ctx)
		stall := watchStall(o.StallTimeout, func() { stalled.Store(true); cancel() })
		fctx = httptrace.WithClientTrace(fctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }})
		done := func() { stall.stop(); cancel() }
		req, err := http.NewRequestWithContext(fctx, http.MethodGet, u, nil)
		if err != nil {
			done()
			r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s: %v", r.Hostname, err)
			return r
		}
		// One fill per rack and file at a time, across the checks this
		// process runs: a second waits for the first, then hits its cache.
		unlock, err := lockFill(ctx, u)
		if err != nil {
			done()
			r.Verdict, r.At = Unknown, o.Now().UTC()
			r.Detail = fmt.Sprintf("rack %s: the check's timeout of %v ran out while another check filled it", r.Hostname, o.Timeout)
			return r
		}
		stop := done
		done = func() { stop(); unlock() }
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			done()
			if ctx.Err() != nil || stalled.Load() || (connected.Load() && isTimeout(err)) {
				return o.notServing(r, addr, connected.Load(), stalled.Load(), 0, t, err)
			}
			unreachable = append(unreachable, fmt.Sprintf("%s: %v", addr, unwrapURLError(err)))
			continue
		}
		r.URL, r.Status = u, resp.StatusCode
		r.Cache = strings.ToLower(resp.Header.Get("X-Cache"))
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			done()
			r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s answered %d %s for %s%s", r.Hostname, resp.StatusCode,
				http.StatusText(resp.StatusCode), path, statusHint(version, resp.StatusCode))
			return r
		}
		var sink streamCheck = &hashed{h: sha256.New()}
		switch {
		case local != nil:
			sink = &matched{ctx: ctx, local: local.r, size: t.Size}
		case conv != nil:
			sink = conv.join()
		}
		defer sink.close()
		// Large reads: fewer system calls per byte checked; each read that
		// brings bytes puts the stall deadline off. The socket is read
		// ahead of the checking, by a goroutine of its own into 4 buffers
		// of 256 KiB: sha256 cannot be split across cores, so a rack's
		// stream is bound by the slower of reading and checking, not by
		// their sum (docs/speed.md).
		body := &progressReader{r: io.LimitReader(resp.Body, t.Size+1), stall: stall}
		ahead, err := readahead.NewReaderSize(body, 4, 256<<10)
		if err != nil {
			resp.Body.Close()
			done()
			r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s: reading ahead: %v", r.Hostname, err)
			return r
		}
		n, err := io.Copy(heldWrites{sink, stall}, ahead)
		// The body first: ahead's Close waits for a read in flight, which
		// a closed body ends at once.
		resp.Body.Close()
		ahead.Close()
		done()
		r.Duration = time.Since(start)
		r.Bytes = n
		if j, ok := sink.(*joined); ok {
			r.Held = j.held
		}
		if s := r.Duration.Seconds(); s > 0 {
			r.BytesPerSecond = float64(n) / s
		}
		var lerr *localError
		var herr *heldError
		switch {
		case errors.As(err, &herr):
			return o.timedOut(r, err)
		case errors.As(err, &lerr):
			local.broke(lerr)
			r.Verdict, r.Detail = Unknown, fmt.Sprintf("rack %s: %v", r.Hostname, err)
		case err != nil && (ctx.Err() != nil || stalled.Load()):
			return o.notServing(r, addr, true, stalled.Load(), n, t, err)
		case err != nil:
			r.SHA256 = sink.partial()
			r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s: the transfer broke after %d of %d bytes: %v", r.Hostname, n, t.Size, err)
		case n > t.Size:
			r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s serves other bytes: more than the %d bytes of %s (read no further)", r.Hostname, t.Size, t.SHA256)
		case n != t.Size || !sink.same(t.SHA256):
			sum, err := sink.sum()
			switch {
			case err != nil && (ctx.Err() != nil || errors.As(err, &herr)):
				return o.timedOut(r, err)
			case err != nil:
				local.broke(err)
				r.Verdict, r.Detail = Unknown, fmt.Sprintf("rack %s served other bytes than the local copy: %v", r.Hostname, err)
			}
			if err != nil {
				break
			}
			r.SHA256 = sum
			if n == t.Size && sum == t.SHA256 {
				// Other bytes than the local copy's, but the version's:
				// the copy is not the version, which the check says.
				if local != nil {
					local.broke(errors.New("a rack served the version with other bytes than the local copy: it cannot stand for the version"))
				}
				r = served(r)
				break
			}
			r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s serves other bytes: sha256 %s (%d bytes), want %s (%d bytes)",
				r.Hostname, r.SHA256, n, t.SHA256, t.Size)
		case local != nil:
			// Equal to the local copy: the rack passes when the copy is
			// the version (awaitLocal).
			r.SHA256 = t.SHA256
			r.awaitsLocal = true
		default:
			r.SHA256 = t.SHA256
			r = served(r)
		}
		return r
	}
	r.Verdict = Unknown
	r.Detail = fmt.Sprintf("rack %s cannot be reached from this host (%s): run the check where deploying machines are, or fix the route",
		r.Hostname, strings.Join(unreachable, "; "))
	return r
}

// awaitLocal is the result of a rack that served the local copy's bytes:
// passed when the copy's hash says it is the version.
func awaitLocal(ctx context.Context, r Rack, local *localCopy) Rack {
	note := r.note
	r.awaitsLocal, r.note = false, ""
	if err := local.wait(ctx); err != nil {
		r.SHA256 = ""
		r.Verdict, r.Detail = Unknown, fmt.Sprintf("rack %s served the same bytes as the local copy, but %v", r.Hostname, err)
	} else {
		r = served(r)
	}
	r.Detail += note
	return r
}

// served is a rack's result when it served the version.
func served(r Rack) Rack {
	r.Verdict, r.Detail = Passed, fmt.Sprintf("rack %s serves it (%s)", r.Hostname, cacheWord(r.Cache))
	return r
}

// notServing is a rack's result when its fetch ended by a deadline:
// failed when it stalled or was connected to (reachable, not serving),
// unknown when the check's time ran out before it was reached.
func (o Options) notServing(r Rack, addr string, connected, stalled bool, n int64, t Target, err error) Rack {
	switch {
	case stalled:
		r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s (%s) sent nothing for %v after %d of %d bytes: it is reachable but not serving",
			r.Hostname, addr, o.StallTimeout, n, t.Size)
	case connected:
		r.Verdict, r.Detail = Failed, fmt.Sprintf("rack %s (%s) had served %d of %d bytes when the check's timeout of %v ran out: it is reachable but not serving it in time",
			r.Hostname, addr, n, t.Size, o.Timeout)
	default:
		return o.timedOut(r, err)
	}
	return r
}

// progressReader puts the stall deadline off at every read that brings
// bytes.
type progressReader struct {
	r     io.Reader
	stall *stallWatch
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.stall.progress()
	}
	return n, err
}

// heldWrites is the check's side of a rack's stream: its stall watch is
// paused while a write is checked (compared with the local copy or the
// other racks' bytes, hashed, or held by the convoy: reads of a disk, a
// wait for the hash or for a rack behind). The socket is read ahead
// meanwhile, then waits on the check, not the check on the rack: only the
// time the check waits for bytes counts.
type heldWrites struct {
	w     io.Writer
	stall *stallWatch
}

func (h heldWrites) Write(p []byte) (int, error) {
	defer h.stall.pause()()
	return h.w.Write(p)
}

// stallWatch calls stalled when a rack has sent nothing for after, not
// counting the time the check itself holds the stream (pause: see
// heldWrites).
type stallWatch struct {
	mu       sync.Mutex
	t        *time.Timer
	after    time.Duration
	deadline time.Time // when it fires, unless paused or stopped
	paused   int
	stopped  bool
}

func watchStall(after time.Duration, stalled func()) *stallWatch {
	w := &stallWatch{after: after, deadline: time.Now().Add(after)}
	w.t = time.AfterFunc(after, func() {
		w.mu.Lock()
		fire := w.paused == 0 && !w.stopped
		if left := time.Until(w.deadline); fire && left > 0 {
			// Bytes came while this call waited for mu.
			w.t.Reset(left)
			fire = false
		}
		w.mu.Unlock()
		if fire {
			stalled()
		}
	})
	return w
}

// rearm sets the deadline after from now. Called with mu held.
func (w *stallWatch) rearm() {
	w.deadline = time.Now().Add(w.after)
	w.t.Reset(w.after)
}

// progress puts the deadline off: bytes came.
func (w *stallWatch) progress() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused == 0 && !w.stopped {
		w.rearm()
	}
}

// pause stops the watch until resume is called (once; more calls do
// nothing).
func (w *stallWatch) pause() (resume func()) {
	w.mu.Lock()
	w.paused++
	w.t.Stop()
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.paused--; w.paused == 0 && !w.stopped {
				w.rearm()
			}
		})
	}
}

// stop ends the watch: the fetch is over.
func (w *stallWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.t.Stop()
}

// isTimeout reports whether err is a deadline (the transport's
// ResponseHeaderTimeout among them).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// statusHint says what an error status of a rack means, at the MAAS
// version: on 3.4 a rack serves its own copies, so a 404 means its copy
// is missing (its image list compares names, not bytes).
func statusHint(version string, status int) string {
	if status == http.StatusNotFound && !maas.AtLeast(version, 3, 5, 0) {
		return " (its own copy of the file is missing, though its image list names it: have it import again)"
	}
	switch status {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return " (it cannot reach a region controller)"
	case http.StatusServiceUnavailable:
		return " (its agent is not serving)"
	case http.StatusNotFound:
		return " (neither it nor its region holds the file)"
	}
	return ""
}

func cacheWord(c string) string {
	switch c {
	case "hit":
		return "its cache had it"
	case "miss":
		return "its cache was cold and is filled now"
	}
	return "from its own disk"
}

func orNone(s string) string {
	if s == "" {
		return "missing"
	}
	return s
}

// fills holds a lock per URL a fill is under way for (lockFill).
var fills sync.Map // URL -> chan struct{}

// lockFill waits, within ctx, until no other check of this process
// fetches url, and holds it until unlock is called.
func lockFill(ctx context.Context, url string) (unlock func(), err error) {
	v, _ := fills.LoadOrStore(url, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// streamCheck is where a rack's stream goes: through sha256, or compared
// with the local copy.
type streamCheck interface {
	io.Writer
	// same reports whether the bytes written are the version's, whose
	// sha256 is want, as far as the stream alone can say (a matched
	// stream also needs its local copy proved).
	same(want string) bool
	// sum is the sha256 of the bytes written, in hex.
	sum() (string, error)
	// partial is sum, or "" when it cannot be had.
	partial() string
	// close lets go of what the check holds.
	close()
}

// hashed checks a stream by its sha256.
type hashed struct{ h hash.Hash }

func (s *hashed) Write(p []byte) (int, error) { return s.h.Write(p) }
func (s *hashed) same(want string) bool       { return hex.EncodeToString(s.h.Sum(nil)) == want }
func (s *hashed) sum() (string, error)        { return hex.EncodeToString(s.h.Sum(nil)), nil }
func (s *hashed) partial() string             { return hex.EncodeToString(s.h.Sum(nil)) }
func (s *hashed) close()                      {}

// matched checks a stream by comparing it with the local copy at the
// same offsets. From the first byte that differs on, it hashes instead:
// the copy up to there (the bytes the rack sent), then the rest of the
// stream, so that a rack serving other bytes is named by their sha256.
// Past the version's size it only counts: such a stream is not the version
// whatever its digest.
type matched struct {
	ctx   context.Context
	local io.ReaderAt
	size  int64
	off   int64       // bytes written
	lb    *localBytes // the local copy's bytes, lent; made at the first write
	h     hash.Hash   // from the first difference on; nil before
	over  bool        // bytes past size were written
}

// localError is a failure to read the local copy: it says nothing of the
// rack.
type localError struct{ err error }

func (e *localError) Error() string { return "reading the local copy of the version: " + e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

func (s *matched) Write(p []byte) (int, error) {
	n := len(p)
	if s.off+int64(len(p)) > s.size {
		s.over = true
		p = p[:max(0, s.size-s.off)]
	}
	if s.lb == nil {
		s.lb = newLocalBytes(s.local, s.size)
	}
	if err := guarded(func() error { return s.write(p) }); err != nil {
		var le *localError
		if !errors.As(err, &le) {
			err = &localError{err}
		}
		return 0, err
	}
	s.off += int64(n - len(p)) // what is past the size, counted
	return n, nil
}

// close lets go of the local copy's bytes.
func (s *matched) close() {
	if s.lb != nil {
		s.lb.close()
	}
}

// write checks p, which ends at the size at the latest.
func (s *matched) write(p []byte) error {
	if s.h != nil {
		s.off += int64(len(p))
		s.h.Write(p)
		return nil
	}
	for done := 0; done < len(p); {
		want, err := s.lb.at(s.off, min(256<<10, len(p)-done))
		if err != nil && !errors.Is(err, io.EOF) {
			return &localError{err}
		}
		got := p[done : done+len(want)]
		if err == nil && bytes.Equal(got, want) {
			done += len(want)
			s.off += int64(len(want))
			continue
		}
		i := sameUpTo(got, want)
		// The stream differs from the copy at s.off+i: hash the copy's
		// bytes before that, which the rack sent too, then the rest.
		h, err := s.hashLocal(s.off + int64(i))
		if err != nil {
			return err
		}
		s.h = h
		rest := p[done+i:]
		s.off += int64(i) + int64(len(rest))
		s.h.Write(rest)
		return nil
	}
	return nil
}

// hashLocal hashes the local copy's first n bytes.
func (s *matched) hashLocal(n int64) (hash.Hash, error) {
	if s.lb == nil {
		s.lb = newLocalBytes(s.local, s.size)
	}
	h := sha256.New()
	got, err := s.lb.hash(s.ctx, h, 0, n)
	if err == nil && got < n {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, &localError{err}
	}
	return h, nil
}

func (s *matched) same(string) bool { return s.h == nil && !s.over }

func (s *matched) sum() (string, error) {
	if s.over {
		return "", errors.New("more bytes than the version's size: no digest taken")
	}
	h := s.h
	if h == nil {
		var err error
		if h, err = s.hashLocal(s.off); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (s *matched) partial() string {
	sum, _ := s.sum()
	return sum
}

// localCopy is the local copy of the version, hashed once while the racks
// serve: err says, when done is closed, whether it is the version.
type localCopy struct {
	r    io.ReaderAt
	done chan struct{}
	err  error
	mu   sync.Mutex
	// brokenBy is the first sign, from the racks' streams, that the copy is
	// not the version or cannot be read: only a copy hashed before
	// (Target.LocalHashed) needs it, a hashed one has its own.
	brokenBy error
}

// broke records err as a sign that the copy is not the version.
func (l *localCopy) broke(err error) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.brokenBy == nil {
		l.brokenBy = err
	}
}

func (l *localCopy) broken() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.brokenBy
}

// hashedBefore is t.Local known to be the version, not hashed again.
func hashedBefore(t Target) *localCopy {
	l := &localCopy{r: t.Local, done: make(chan struct{})}
	close(l.done)
	return l
}

// hashLocal starts hashing t.Local, until ctx ends.
func hashLocal(ctx context.Context, t Target) *localCopy {
	l := &localCopy{r: t.Local, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		h := sha256.New()
		lb := newLocalBytes(t.Local, t.Size)
		defer lb.close()
		// One byte past the size: a longer copy is not the version.
		n, err := lb.hash(ctx, h, 0, t.Size+1)
		sum := hex.EncodeToString(h.Sum(nil))
		switch {
		case err != nil:
			l.err = &localError{err}
		case n != t.Size || sum != t.SHA256:
			l.err = fmt.Errorf("the local copy of the version has sha256 %s (%d bytes), not %s (%d bytes): it cannot stand for the version", sum, n, t.SHA256, t.Size)
		}
	}()
	return l
}

// wait waits for the local copy's hash: nil when it is the version.
func (l *localCopy) wait(ctx context.Context) error {
	select {
	case <-l.done:
		return l.err
	case <-ctx.Done():
		return fmt.Errorf("the local copy was not hashed yet when the check ended: %w", ctx.Err())
	}
}

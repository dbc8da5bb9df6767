package maas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/event"
)

// Image is what Upload sends: bytes with their known sha256 and size, and
// the boot resource they become.
type Image struct {
	// Content is the image, read at offsets in order from 0 (again from 0
	// after a fresh start): a file, or a store version's tgz streamed from
	// a registry. Wrap it in digest.NewCheckedReaderAt so that a last byte
	// of the wrong content is never sent. When nil, the file at Path is
	// read.
	Content io.ReaderAt
	// Path names the image in messages, and is read when Content is nil.
	Path   string
	SHA256 string // 64 lowercase hex digits
	Size   int64
	// Name is the boot resource's name, such as "gpuaas-h200-1-4-0".
	Name string
	// Title is what MAAS shows.
	Title        string
	Architecture string
	// BaseImage is the <os>/<series> the custom image is built on.
	BaseImage string
	// Filetype defaults to "tgz".
	Filetype string
}

// Upload phases.
const (
	PhaseLookup   = "lookup"
	PhaseCreate   = "create"
	PhaseUpload   = "upload"
	PhaseComplete = "complete"
)

// Result is the outcome of an upload.
type Result struct {
	// Resource is the boot resource as MAAS holds it at the end: its
	// newest set's file has the image's sha256 and is complete.
	Resource *Resource
	// Skipped is true when MAAS already held the image, so no byte was sent.
	Skipped bool
	// Waited is true when another uploader (another imagectl sending the
	// same image to the same MAAS) completed the file while this one
	// waited for it.
	Waited bool `json:",omitempty"`
	// Restarts counts deletions and fresh starts after a stuck file or an
	// unknown offset.
	Restarts int
	// Sent is the number of file bytes sent, retries included.
	Sent int64
}

// restart is an upload state only a fresh start can leave. stuck is set
// when MAAS holds all the bytes but they did not hash to the sha256: the
// file can never grow or complete, whoever sends.
type restart struct {
	why   string
	stuck bool
}

func (r *restart) Error() string { return r.why }

// lost is our file gone from MAAS while we sent it: another uploader's
// create of the same name replaced it (MAAS deletes the files of a
// resource's older sets on create), or someone deleted the resource.
type lost struct{ why string }

func (l *lost) Error() string { return l.why }

// readError is a failure to read the image itself (not the network):
// sending again cannot help.
type readError struct{ err error }

func (e *readError) Error() string { return "reading the image: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

type upload struct {
	c   *Client
	img Image
	rep event.Reporter
	res Result
}

// Upload makes MAAS hold img as a complete boot resource, or fails saying
// why; it never leaves MAAS holding other bytes under img.Name as if they
// were img. events may be nil.
//
// Several uploaders may send the same image to the same MAAS at once (two
// promotions, a retry started while the first still runs): one that finds
// the image's file incomplete but growing waits for it instead of sending
// too, and only a file that made no progress for Config.StallTimeout is
// deleted; a file complete with the image's sha256 never is. One that
// loses its file to another's create (MAAS replaces a resource's files on
// create) or finds the file it appends to not at its offset looks the
// resource up and waits likewise.
func (c *Client) Upload(ctx context.Context, img Image, events func(event.Event)) (*Result, error) {
	if img.Filetype == "" {
		img.Filetype = "tgz"
	}
	img.SHA256 = strings.ToLower(img.SHA256)
	if len(img.SHA256) != 64 || strings.Trim(img.SHA256, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("uploading %s: sha256 %q is not 64 hex digits", img.Path, img.SHA256)
	}
	if img.Content == nil {
		f, err := os.Open(img.Path)
		if err != nil {
			return nil, fmt.Errorf("uploading %s: %w", img.Path, err)
		}
		defer f.Close()
		if st, err := f.Stat(); err != nil {
			return nil, fmt.Errorf("uploading %s: %w", img.Path, err)
		} else if st.Size() != img.Size {
			return nil, fmt.Errorf("uploading %s: the file has %d bytes, expected %d", img.Path, st.Size(), img.Size)
		}
		img.Content = f
	}
	u := &upload{c: c, img: img, rep: events}
	for {
		done := u.rep.Phase(PhaseLookup, fmt.Sprintf("look for %s (%s) on %s", img.Name, img.Architecture, c.cfg.URL))
		held, err := u.lookup(ctx)
		done(err)
		if err != nil {
			return &u.res, err
		}
		if held != nil {
			u.res.Resource = held
			if !u.res.Waited && u.res.Sent == 0 {
				u.res.Skipped = true
				u.rep.Log(fmt.Sprintf("MAAS already holds %s with sha256 %s: nothing to send", img.Name, img.SHA256))
			}
			return &u.res, nil
		}
		done = u.rep.Phase(PhaseCreate, fmt.Sprintf("create boot resource %s (sha256 %s, %d bytes)", img.Name, img.SHA256[:12], img.Size))
		res, file, err := u.create(ctx)
		done(err)
		var ls *lost
		if errors.As(err, &ls) && u.res.Restarts < c.cfg.Restarts {
			u.res.Restarts++
			u.rep.Log(fmt.Sprintf("%v: looking the resource up again (%d/%d)", err, u.res.Restarts, c.cfg.Restarts))
			continue
		}
		if err != nil {
			return &u.res, err
		}
		if file.Complete {
			// MAAS stores files by sha256: it already had these bytes.
			u.res.Resource = res
			if u.res.Sent == 0 {
				u.res.Skipped = true
			}
			u.rep.Log(fmt.Sprintf("MAAS already holds sha256 %s: nothing to send", img.SHA256))
			return &u.res, nil
		}
		done = u.rep.Phase(PhaseUpload, fmt.Sprintf("upload %d bytes in %d-byte chunks", img.Size, c.cfg.ChunkSize))
		err = u.chunks(ctx, img.Content, file.UploadURI)
		done(err)
		if err == nil {
			done = u.rep.Phase(PhaseComplete, "wait for MAAS to report the file complete")
			final, err := u.waitComplete(ctx, res.ID, u.c.cfg.CompleteTimeout)
			done(err)
			u.res.Resource = final
			return &u.res, err
		}
		var (
			rs *restart
			re *readError
		)
		switch {
		case errors.As(err, &re):
			// The image's own bytes failed (a sha256 mismatch of the
			// content as read): nobody can complete this file with them,
			// so it goes, unless it is no longer ours.
			u.rep.Log(fmt.Sprintf("%v: deleting boot resource %d", err, res.ID))
			if _, derr := u.deleteUnlessComplete(context.WithoutCancel(ctx), res.ID, file.UploadURI); derr != nil {
				err = fmt.Errorf("%w (and deleting the incomplete boot resource %d failed: %v)", err, res.ID, derr)
			}
			return &u.res, err
		case errors.As(err, &ls):
			// Another uploader's file (or none) is there now: the lookup
			// waits for it, or starts afresh.
			u.rep.Log(fmt.Sprintf("%v: looking the resource up", err))
		case errors.As(err, &rs):
			final, derr := u.discard(ctx, res.ID, file.UploadURI, rs)
			if derr != nil {
				return &u.res, derr
			}
			if final != nil {
				u.res.Resource = final
				return &u.res, nil
			}
		default:
			return &u.res, err
		}
		if u.res.Restarts >= c.cfg.Restarts {
			return &u.res, fmt.Errorf("uploading %s to %s: gave up after %d fresh starts: %w", img.Name, c.cfg.URL, u.res.Restarts, err)
		}
		u.res.Restarts++
		u.rep.Log(fmt.Sprintf("starting again (%d/%d)", u.res.Restarts, c.cfg.Restarts))
	}
}

// lookup returns the resource when MAAS holds the image complete under its
// name (another uploader may have completed it while lookup waited),
// refuses other bytes complete under the name (versioned names are
// immutable), waits for an incomplete file that makes progress (another
// uploader is sending it, or MAAS is syncing it), and deletes one that
// stalled. nil means the name is free: create it.
func (u *upload) lookup(ctx context.Context) (*Resource, error) {
	for {
		res, err := u.c.Find(ctx, u.img.Name, u.img.Architecture)
		if err != nil || res == nil {
			return nil, err
		}
		f := res.File()
		switch {
		case f != nil && f.SHA256 == u.img.SHA256 && f.Complete:
			return res, nil
		case f != nil && f.SHA256 != u.img.SHA256 && f.Complete:
			return nil, fmt.Errorf("MAAS at %s already holds %s (boot resource %d) with sha256 %s, not %s: a versioned name is immutable, so this is a different build of the same version",
				u.c.cfg.URL, u.img.Name, res.ID, f.SHA256, u.img.SHA256)
		}
		w, err := u.watch(ctx, res)
		if err != nil {
			return nil, err
		}
		switch w.outcome {
		case watchComplete:
			u.res.Waited = u.res.Waited || w.grew
			continue // looked at again above: ours, or other bytes
		case watchChanged:
			continue
		case watchStalled:
			u.rep.Log(fmt.Sprintf("boot resource %d (%s) is incomplete or empty and made no progress for %v: deleting it", res.ID, res.Name, w.limit))
			final, err := u.deleteUnlessComplete(ctx, res.ID, "")
			if err != nil || final != nil {
				return final, err
			}
		}
	}
}

// Outcomes of watch.
const (
	watchComplete = iota // the newest file shows complete
	watchChanged         // the resource or its newest file went or was replaced
	watchStalled         // no progress within the limit
)

type watched struct {
	outcome int
	res     *Resource
	limit   time.Duration
	// grew: the file made progress while watched (someone was sending).
	grew bool
}

// waitLimit is how long an incomplete file of size bytes at progress
// percent may make no progress before it counts as abandoned: with all
// its bytes, SettleTimeout; with only a last chunk missing, at least the
// last chunk's timeout and a backoff (MAAS hashes the file inside that
// chunk's request, and its bytes show only when the request commits);
// else StallTimeout.
func (c *Client) waitLimit(size int64, progress float64) time.Duration {
	switch {
	case progress >= 100:
		return c.cfg.SettleTimeout
	case float64(size)*(100-progress)/100 <= float64(max(c.cfg.ChunkSize, DefaultChunkSize))+1:
		return max(c.cfg.StallTimeout, c.cfg.LastChunkTimeout+c.cfg.Backoff(1))
	default:
		return c.cfg.StallTimeout
	}
}

// watch polls an incomplete resource until its newest file completes, is
// replaced, goes, or makes no progress for Config.StallTimeout (for a file
// with all its bytes, which MAAS is hashing or syncing to the regions,
// Config.SettleTimeout).
func (u *upload) watch(ctx context.Context, res *Resource) (watched, error) {
	f := res.File()
	if f == nil {
		// No file to wait for: a set left empty by a create that failed.
		return watched{outcome: watchStalled, limit: 0}, nil
	}
	uri, last, since := f.UploadURI, f.Progress, time.Now()
	limit := func() time.Duration { return u.c.waitLimit(f.Size, last) }
	told, grew := false, false
	for {
		if time.Since(since) >= limit() {
			return watched{outcome: watchStalled, res: res, limit: limit(), grew: grew}, nil
		}
		if !told && last > 0 && last < 100 {
			u.rep.Log(fmt.Sprintf("boot resource %d (%s) is being uploaded (%.0f%%), perhaps by another imagectl: waiting for it", res.ID, res.Name, last))
			told = true
		}
		t := time.NewTimer(u.c.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return watched{}, ctx.Err()
		case <-t.C:
		}
		cur, err := u.c.Get(ctx, res.ID)
		if IsNotFound(err) {
			return watched{outcome: watchChanged}, nil
		}
		if err != nil {
			return watched{}, err
		}
		res = cur
		f := cur.File()
		switch {
		case f == nil:
			return watched{outcome: watchChanged, res: cur, grew: grew}, nil
		case f.Complete:
			return watched{outcome: watchComplete, res: cur, grew: grew || last < 100}, nil
		case f.UploadURI != uri:
			return watched{outcome: watchChanged, res: cur, grew: grew}, nil
		case f.Progress > last:
			grew = true
			if !told && f.Progress < 100 {
				u.rep.Log(fmt.Sprintf("boot resource %d (%s) is being uploaded (%.0f%%), perhaps by another imagectl: waiting for it", cur.ID, cur.Name, f.Progress))
				told = true
			}
			last, since = f.Progress, time.Now()
		}
	}
}

// discard handles a fresh-start state of our file (at uploadURI in
// resource id): the resource is deleted only when its newest file is still
// ours and stuck, or made no progress for the stall limit; a complete file
// with the image's sha256 is returned instead, and another uploader's
// newer file is left to lookup, which waits for it.
func (u *upload) discard(ctx context.Context, id int, uploadURI string, rs *restart) (*Resource, error) {
	res, f, settled, err := u.reread(ctx, id)
	if settled {
		return res, err
	}
	if f == nil || f.UploadURI != uploadURI {
		u.rep.Log(fmt.Sprintf("%v, and boot resource %d holds another upload now: looking it up", rs, id))
		return nil, nil
	}
	if !rs.stuck {
		// The offset is not ours: if someone else appends to this file it
		// grows, and deleting it would undo their work.
		w, err := u.watch(ctx, res)
		if err != nil {
			return nil, err
		}
		if w.outcome != watchStalled {
			u.rep.Log(fmt.Sprintf("%v, and boot resource %d changed meanwhile: looking it up", rs, id))
			return nil, nil
		}
	}
	u.rep.Log(fmt.Sprintf("%v: deleting boot resource %d", rs, id))
	return u.deleteUnlessComplete(ctx, id, uploadURI)
}

// deleteUnlessComplete deletes the resource unless it shows the image's
// file complete (returned then) or, when uploadURI is set, its newest
// file is no longer that one (another uploader's: nothing is deleted).
// MAAS has no conditional delete: this narrows the window, it cannot
// close it.
func (u *upload) deleteUnlessComplete(ctx context.Context, id int, uploadURI string) (*Resource, error) {
	res, f, settled, err := u.reread(ctx, id)
	if settled {
		return res, err
	}
	if uploadURI != "" && (f == nil || f.UploadURI != uploadURI) {
		return nil, nil
	}
	return nil, u.c.Delete(ctx, id)
}

// reread reads resource id back before a decision about it. When there is
// none to make, settled is set and res and err are what to return: the
// resource when its newest file is the image's, complete; nil when it is
// gone; or the error. Otherwise f is its newest file (nil when none).
func (u *upload) reread(ctx context.Context, id int) (res *Resource, f *File, settled bool, err error) {
	res, err = u.c.Get(ctx, id)
	if IsNotFound(err) {
		return nil, nil, true, nil
	}
	if err != nil {
		return nil, nil, true, err
	}
	f = res.File()
	if f != nil && f.Complete && f.SHA256 == u.img.SHA256 {
		return res, f, true, nil
	}
	return res, f, false, nil
}

// create creates the resource with an empty file. A create that gets no
// answer may have been applied: the resource is looked up and, when it
// holds a fresh file with the image's sha256, used.
func (u *upload) create(ctx context.Context) (*Resource, *File, error) {
	img := u.img
	doing := fmt.Sprintf("creating boot resource %s on %s", img.Name, u.c.cfg.URL)
	form := url.Values{
		"name": {img.Name}, "title": {img.Title}, "architecture": {img.Architecture}, "filetype": {img.Filetype},
		"sha256": {img.SHA256}, "size": {strconv.FormatInt(img.Size, 10)},
	}
	if img.BaseImage != "" {
		form.Set("base_image", img.BaseImage)
	}
	body := form.Encode()
	for n := 1; ; n++ {
		resp, err := u.c.send(ctx, http.MethodPost, "boot-resources/", strings.NewReader(body), int64(len(body)),
			"application/x-www-form-urlencoded", u.c.cfg.Timeout)
		switch {
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case err == nil && resp.status == http.StatusCreated:
			var res Resource
			if err := json.Unmarshal([]byte(resp.body), &res); err != nil {
				return nil, nil, fmt.Errorf("%s: MAAS's answer is not a boot resource: %w", doing, err)
			}
			f := res.File()
			if f == nil || f.SHA256 != img.SHA256 || f.Size != img.Size || (!f.Complete && f.UploadURI == "") {
				return nil, nil, fmt.Errorf("%s: MAAS's answer has no file for sha256 %s to upload to", doing, img.SHA256)
			}
			return &res, f, nil
		case err == nil && resp.status != http.StatusServiceUnavailable:
			return nil, nil, &APIError{Doing: doing, Status: resp.status, Message: resp.body}
		case err != nil && resp.sent:
			u.rep.Log(fmt.Sprintf("no answer to the create (%v): looking the resource up", err))
			res, lerr := u.c.Find(ctx, img.Name, img.Architecture)
			if lerr != nil {
				return nil, nil, lerr
			}
			if res != nil {
				if f := res.File(); f != nil && f.SHA256 == img.SHA256 && (f.Complete || f.UploadURI != "" && f.Progress == 0) {
					return res, f, nil
				}
				// Another uploader's file, under way or stalled: the
				// lookup waits for it or deletes it.
				return nil, nil, &lost{fmt.Sprintf("boot resource %d is not a fresh upload of this image", res.ID)}
			}
		}
		if n > u.c.cfg.Retries {
			if err == nil {
				err = &APIError{Doing: doing, Status: resp.status, Message: resp.body}
			}
			return nil, nil, fmt.Errorf("%s: giving up after %d retries: %w", doing, u.c.cfg.Retries, err)
		}
		why := fmt.Sprint(err)
		if err == nil {
			why = "503 Service Unavailable"
		}
		u.rep.Log(fmt.Sprintf("create: retry %d/%d after %s", n, u.c.cfg.Retries, why))
		if err := u.c.sleep(ctx, n); err != nil {
			return nil, nil, err
		}
	}
}

// chunks appends the file to MAAS in order, from offset 0.
func (u *upload) chunks(ctx context.Context, f io.ReaderAt, uploadURI string) error {
	size, chunk := u.img.Size, u.c.cfg.ChunkSize
	retries := 0
	for off := int64(0); off < size; {
		n := min(chunk, size-off)
		last := off+n == size
		timeout := u.c.cfg.Timeout
		if last {
			timeout = u.c.cfg.LastChunkTimeout
		}
		doing := fmt.Sprintf("uploading %s bytes %d-%d to %s", u.img.Name, off, off+n, u.c.cfg.URL)
		resp, err := u.c.send(ctx, http.MethodPut, uploadURI, io.NewSectionReader(f, off, n), n, "application/octet-stream", timeout)
		if resp.sent {
			u.res.Sent += n
		}
		var re *readError
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &re):
			return fmt.Errorf("uploading %s bytes %d-%d from %s: %w", u.img.Name, off, off+n, u.img.Path, re)
		case err == nil && resp.status == http.StatusNotFound:
			return &lost{fmt.Sprintf("MAAS no longer has the file being sent (%s): another upload of the name replaced it, or the resource was deleted", doing)}
		case err == nil && resp.status == http.StatusOK:
			off += n
			retries = 0
			u.rep.Progress(PhaseUpload, off, size)
			continue
		case err == nil && resp.status == http.StatusBadRequest && strings.Contains(resp.body, "does not match given SHA256"):
			return &restart{why: fmt.Sprintf("MAAS computed another sha256 than %s for the uploaded file (corrupted in transit?)", u.img.SHA256), stuck: true}
		case err == nil && resp.status == http.StatusBadRequest && strings.Contains(resp.body, "Too much data received"):
			return &restart{why: fmt.Sprintf("MAAS holds more bytes than were sent in order (%s)", doing)}
		case err == nil && resp.status == http.StatusBadRequest && strings.Contains(resp.body, "Cannot upload to a complete file"):
			if last {
				// An earlier send of this chunk was applied.
				return nil
			}
			return &restart{why: fmt.Sprintf("MAAS says the file is complete at offset %d of %d", off, size)}
		case err == nil && resp.status != http.StatusServiceUnavailable:
			return &APIError{Doing: doing, Status: resp.status, Message: resp.body}
		case err != nil && resp.sent && !last:
			// MAAS appends at its own offset, which is now unknown.
			return &restart{why: fmt.Sprintf("no answer after sending bytes %d-%d (%v): MAAS's offset is unknown", off, off+n, err)}
		case err != nil && resp.sent && last:
			// The last chunk may have been applied (and hashed): look.
			u.rep.Log(fmt.Sprintf("no answer to the last chunk (%v): looking the file up", err))
			if ok, lerr := u.holds(ctx, uploadURI); lerr != nil {
				return lerr
			} else if ok {
				return nil
			}
			// Not complete yet: sending it again tells (200, or
			// "Cannot upload to a complete file").
		}
		retries++
		if retries > u.c.cfg.Retries {
			if err == nil {
				err = &APIError{Doing: doing, Status: resp.status, Message: resp.body}
			}
			return fmt.Errorf("%s: giving up after %d retries: %w", doing, u.c.cfg.Retries, err)
		}
		why := fmt.Sprint(err)
		if err == nil {
			why = "503 Service Unavailable"
		}
		u.rep.Log(fmt.Sprintf("chunk at %d: retry %d/%d after %s", off, retries, u.c.cfg.Retries, why))
		if err := u.c.sleep(ctx, retries); err != nil {
			return err
		}
	}
	return nil
}

// holds reports whether the resource owning uploadURI shows the image's
// file complete.
func (u *upload) holds(ctx context.Context, uploadURI string) (bool, error) {
	id, err := resourceID(uploadURI)
	if err != nil {
		return false, err
	}
	res, err := u.c.Get(ctx, id)
	if err != nil {
		return false, err
	}
	f := res.File()
	return f != nil && f.SHA256 == u.img.SHA256 && f.Complete, nil
}

// resourceID is the {id} of …/boot-resources/{id}/upload/{file}/.
func resourceID(uploadURI string) (int, error) {
	_, rest, ok := strings.Cut(uploadURI, "boot-resources/")
	if ok {
		idStr, _, _ := strings.Cut(rest, "/")
		if id, err := strconv.Atoi(idStr); err == nil {
			return id, nil
		}
	}
	return 0, fmt.Errorf("MAAS upload URI %q names no boot resource", uploadURI)
}

// waitComplete polls the resource until its newest set's file has the
// image's sha256 and shows complete.
func (u *upload) waitComplete(ctx context.Context, id int, limit time.Duration) (*Resource, error) {
	deadline := time.Now().Add(limit)
	for {
		res, err := u.c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		f := res.File()
		switch {
		case f == nil || f.SHA256 != u.img.SHA256:
			return nil, fmt.Errorf("boot resource %d on %s no longer holds sha256 %s", id, u.c.cfg.URL, u.img.SHA256)
		case f.Complete:
			return res, nil
		case time.Now().After(deadline):
			return nil, fmt.Errorf("boot resource %d (%s) on %s: MAAS has not reported the file complete within %v (MAAS 3.5+ syncs it to every region first; progress %.0f%%)",
				id, res.Name, u.c.cfg.URL, limit, f.Progress)
		}
		t := time.NewTimer(u.c.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

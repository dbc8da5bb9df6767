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

// Image is what Upload sends: a file with its known sha256 and size, and
// the boot resource it becomes.
type Image struct {
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
	// Restarts counts deletions and fresh starts after a stuck file or an
	// unknown offset.
	Restarts int
	// Sent is the number of file bytes sent, retries included.
	Sent int64
}

// restart is an upload state only a fresh start can leave.
type restart struct{ why string }

func (r *restart) Error() string { return r.why }

type upload struct {
	c   *Client
	img Image
	rep event.Reporter
	res Result
}

// Upload makes MAAS hold img as a complete boot resource, or fails saying
// why; it never leaves MAAS holding other bytes under img.Name as if they
// were img. events may be nil.
func (c *Client) Upload(ctx context.Context, img Image, events func(event.Event)) (*Result, error) {
	if img.Filetype == "" {
		img.Filetype = "tgz"
	}
	img.SHA256 = strings.ToLower(img.SHA256)
	if len(img.SHA256) != 64 || strings.Trim(img.SHA256, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("uploading %s: sha256 %q is not 64 hex digits", img.Path, img.SHA256)
	}
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
	u := &upload{c: c, img: img, rep: events}
	done := u.rep.Phase(PhaseLookup, fmt.Sprintf("look for %s (%s) on %s", img.Name, img.Architecture, c.cfg.URL))
	skip, err := u.lookup(ctx)
	done(err)
	if err != nil || skip != nil {
		if skip != nil {
			u.res.Resource, u.res.Skipped = skip, true
			u.rep.Log(fmt.Sprintf("MAAS already holds %s with sha256 %s: nothing to send", img.Name, img.SHA256))
		}
		return &u.res, err
	}
	for {
		done := u.rep.Phase(PhaseCreate, fmt.Sprintf("create boot resource %s (sha256 %s, %d bytes)", img.Name, img.SHA256[:12], img.Size))
		res, file, err := u.create(ctx)
		done(err)
		if err != nil {
			return &u.res, err
		}
		if file.Complete {
			// MAAS stores files by sha256: it already had these bytes.
			u.res.Resource, u.res.Skipped = res, true
			u.rep.Log(fmt.Sprintf("MAAS already holds sha256 %s: nothing to send", img.SHA256))
			return &u.res, nil
		}
		done = u.rep.Phase(PhaseUpload, fmt.Sprintf("upload %d bytes in %d-byte chunks", img.Size, c.cfg.ChunkSize))
		err = u.chunks(ctx, f, file.UploadURI)
		done(err)
		if err == nil {
			done = u.rep.Phase(PhaseComplete, "wait for MAAS to report the file complete")
			final, err := u.waitComplete(ctx, res.ID, u.c.cfg.CompleteTimeout)
			done(err)
			u.res.Resource = final
			return &u.res, err
		}
		var rs *restart
		if !errors.As(err, &rs) {
			return &u.res, err
		}
		if u.res.Restarts >= c.cfg.Restarts {
			// Leave no stuck file behind; a failure here changes nothing.
			_ = c.Delete(ctx, res.ID)
			return &u.res, fmt.Errorf("uploading %s to %s: gave up after %d fresh starts: %w", img.Name, c.cfg.URL, u.res.Restarts, err)
		}
		u.res.Restarts++
		u.rep.Log(fmt.Sprintf("%v: deleting boot resource %d and starting again (%d/%d)", err, res.ID, u.res.Restarts, c.cfg.Restarts))
		if err := c.Delete(ctx, res.ID); err != nil {
			return &u.res, err
		}
	}
}

// lookup returns the resource when MAAS already holds the image complete
// under its name, deletes a partial or stale one, and refuses other bytes
// complete under the name: versioned names are immutable.
func (u *upload) lookup(ctx context.Context) (*Resource, error) {
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
	case f != nil && f.SHA256 == u.img.SHA256:
		// Maybe fully uploaded and still syncing to the regions (3.5+).
		if final, err := u.waitComplete(ctx, res.ID, u.c.cfg.SettleTimeout); err == nil {
			return final, nil
		} else if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	u.rep.Log(fmt.Sprintf("boot resource %d (%s) is incomplete or empty: deleting it", res.ID, res.Name))
	return nil, u.c.Delete(ctx, res.ID)
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
				u.rep.Log(fmt.Sprintf("boot resource %d is not a fresh upload of this image: deleting it", res.ID))
				if err := u.c.Delete(ctx, res.ID); err != nil {
					return nil, nil, err
				}
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
func (u *upload) chunks(ctx context.Context, f *os.File, uploadURI string) error {
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
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil && resp.status == http.StatusOK:
			off += n
			retries = 0
			u.rep.Progress(PhaseUpload, off, size)
			continue
		case err == nil && resp.status == http.StatusBadRequest && strings.Contains(resp.body, "does not match given SHA256"):
			return &restart{fmt.Sprintf("MAAS computed another sha256 than %s for the uploaded file (corrupted in transit?)", u.img.SHA256)}
		case err == nil && resp.status == http.StatusBadRequest && strings.Contains(resp.body, "Too much data received"):
			return &restart{fmt.Sprintf("MAAS holds more bytes than were sent in order (%s)", doing)}
		case err == nil && resp.status == http.StatusBadRequest && strings.Contains(resp.body, "Cannot upload to a complete file"):
			if last {
				// An earlier send of this chunk was applied.
				return nil
			}
			return &restart{fmt.Sprintf("MAAS says the file is complete at offset %d of %d", off, size)}
		case err == nil && resp.status != http.StatusServiceUnavailable:
			return &APIError{Doing: doing, Status: resp.status, Message: resp.body}
		case err != nil && resp.sent && !last:
			// MAAS appends at its own offset, which is now unknown.
			return &restart{fmt.Sprintf("no answer after sending bytes %d-%d (%v): MAAS's offset is unknown", off, off+n, err)}
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

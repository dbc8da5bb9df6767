package apply

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/builder/debcache"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/internal/shell"
)

// archives is where the guest's apt keeps downloaded archives, and where
// it looks for them before downloading.
const archives = "/var/cache/apt/archives"

// debMTime is the modification time of the archives handed to the guest:
// fixed, so an image that keeps apt's cache has the same bytes however
// often the cache served them.
var debMTime = bundleMTime

// aptProxyConf is the guest's apt configuration file naming the build's
// apt proxy while a packages step runs.
const aptProxyConf = "/etc/apt/apt.conf.d/99imagectl-build-proxy"

// useAptProxy writes the apt proxy into the guest's apt configuration and
// returns its removal. The file holds the proxy's credentials: it is
// removed when the step ends, whatever happened, and a step whose removal
// failed fails.
func (a *Applier) useAptProxy(ctx context.Context) (func() error, error) {
	q := strings.ReplaceAll(a.AptProxy, `"`, "%22")
	conf := "Acquire::http::Proxy \"" + q + "\";\nAcquire::https::Proxy \"" + q + "\";\n"
	if err := a.Session.WriteFile(ctx, aptProxyConf, []byte(conf), 0o600, "root:root"); err != nil {
		return nil, fmt.Errorf("writing the build's apt proxy into the guest: %w", err)
	}
	return func() error {
		// Removed even when ctx ended: the session is still open.
		if _, err := a.Session.Run(context.WithoutCancel(ctx), "rm -f "+aptProxyConf); err != nil {
			return fmt.Errorf("removing the build's apt proxy from the guest: %w", err)
		}
		return nil
	}, nil
}

// timed adds the time until the returned func is called to *into.
func (a *Applier) timed(into *float64) func() {
	start := time.Now()
	return func() { *into += time.Since(start).Seconds() }
}

// install resolves, downloads and installs pkgs. A resolution apt refuses
// is not downloaded: the install fails the same way, and says so.
func (a *Applier) install(ctx context.Context, install string, pkgs []string) error {
	us, err := a.printURIs(ctx, install, pkgs)
	if err != nil && !isCommandError(err) {
		return err
	}
	return a.installResolved(ctx, install, pkgs, us)
}

// printURIs asks the guest's apt which archives the install would fetch:
// its resolution against the image's sources, keys and pins, which
// changes nothing in the guest. It counts as Resolve.
func (a *Applier) printURIs(ctx context.Context, install string, pkgs []string) ([]debcache.URI, error) {
	defer a.timed(&a.Timings.Resolve)()
	out, err := a.run(ctx, install+"--print-uris -qq "+shell.Join(pkgs))
	if err != nil {
		return nil, err
	}
	us, err := debcache.ParseURIs(out)
	if err != nil {
		return nil, fmt.Errorf("reading what apt would fetch for %s: %w", strings.Join(pkgs, " "), err)
	}
	return us, nil
}

// installResolved downloads the archives apt resolved (us; see download),
// then runs the install, which counts as Install.
func (a *Applier) installResolved(ctx context.Context, install string, pkgs []string, us []debcache.URI) error {
	if err := a.download(ctx, install, pkgs, us); err != nil {
		return err
	}
	defer a.timed(&a.Timings.Install)()
	_, err := a.run(ctx, install+shell.Join(pkgs))
	return err
}

// download fetches the archives apt resolved on the host into the package
// cache when a.Debs is set, each checked against the sha256 of the signed
// index's record, and puts them in the guest's archives directory, where
// apt finds them downloaded. What the host could not fetch, the guest's
// apt downloads itself (--download-only), said in a log line naming the
// package and why. Reading the archives' index records counts as
// Resolve, the rest as Download.
func (a *Applier) download(ctx context.Context, install string, pkgs []string, us []debcache.URI) error {
	if len(us) == 0 {
		return nil
	}
	done := a.timed(&a.Timings.Resolve)
	debs, unresolved, err := a.resolve(ctx, us)
	done()
	if err != nil {
		return err
	}
	defer a.timed(&a.Timings.Download)()
	byFile := map[string]bool{}
	if a.Debs != nil {
		for _, f := range slices.Sorted(maps.Keys(unresolved)) {
			a.Events.Log(redact.Text(fmt.Sprintf("package archive %s: fetched by the guest (%s)", f, unresolved[f])))
		}
		if byFile, err = a.hostFetch(ctx, debs); err != nil {
			return err
		}
	}
	var guestBytes int64
	for _, u := range us {
		if !byFile[u.Filename] {
			guestBytes += u.Size
		}
	}
	if guestBytes == 0 {
		return nil
	}
	if _, err := a.run(ctx, install+"--download-only "+shell.Join(pkgs)); err != nil {
		return err
	}
	a.Timings.DownloadBytes += guestBytes
	return nil
}

// resolve reads the index records of the archives (apt-cache show
// name=version), recording them in a.Fetched: the sha256 is the index's.
func (a *Applier) resolve(ctx context.Context, us []debcache.URI) ([]debcache.Deb, map[string]string, error) {
	var args []string
	seen := map[string]bool{}
	for _, u := range us {
		name, version, _, err := u.NameVersion()
		if err != nil || seen[name+"="+version] {
			continue
		}
		seen[name+"="+version] = true
		args = append(args, name+"="+version)
	}
	var records []debcache.Record
	if len(args) > 0 {
		out, err := a.Session.Run(ctx, "apt-cache show "+shell.Join(args))
		if err != nil && !isCommandError(err) {
			return nil, nil, err
		}
		if err == nil {
			records = debcache.ParseRecords(out)
		}
	}
	debs, unresolved := debcache.Resolve(us, records)
	got := map[string]bool{}
	for _, d := range debs {
		got[d.Filename] = true
	}
	for _, u := range us {
		if got[u.Filename] {
			continue
		}
		d := debcache.Deb{URL: u.URL, Filename: u.Filename, Size: u.Size}
		d.Name, d.Version, d.Architecture, _ = u.NameVersion()
		a.Fetched = append(a.Fetched, d)
	}
	a.Fetched = append(a.Fetched, debs...)
	return debs, unresolved, nil
}

// hostFetch fetches debs into the package cache and tars the ones it got
// into the guest's archives directory in one stream, returning their file
// names.
func (a *Applier) hostFetch(ctx context.Context, debs []debcache.Deb) (map[string]bool, error) {
	res, err := a.Debs.Fetch(ctx, debs)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// The cache itself failed (its lock, its directory): the guest
		// downloads everything.
		a.Events.Log(redact.Text(fmt.Sprintf("the package cache failed, the guest fetches this step's %d packages itself: %v", len(debs), err)))
		return map[string]bool{}, nil
	}
	var ok []debcache.Result
	for _, r := range res {
		switch {
		case r.Err == nil:
			ok = append(ok, r)
			if r.Replaced != "" {
				a.Events.Log(redact.Text(fmt.Sprintf("package %s %s: fetched again (%s)", r.Deb.Name, r.Deb.Version, r.Replaced)))
			}
			if r.Cached {
				a.Timings.CachedBytes += r.Deb.Size
			} else {
				a.Timings.DownloadBytes += r.Fetched
				a.Timings.CachedBytes += r.Deb.Size - r.Fetched
			}
		default:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			a.Events.Log(redact.Text(fmt.Sprintf("package %s %s: fetched by the guest, not the host (%v)", r.Deb.Name, r.Deb.Version, unwrapNotFetchable(r.Err))))
		}
	}
	if len(ok) == 0 {
		return map[string]bool{}, nil
	}
	if err := a.tarIn(ctx, archives, "handing the fetched archives to the guest", "handing archives to the guest stopped", func(w io.Writer) error {
		return writeDebTar(ctx, ok, w)
	}); err != nil {
		return nil, err
	}
	files := map[string]bool{}
	for _, r := range ok {
		files[r.Deb.Filename] = true
	}
	return files, nil
}

func unwrapNotFetchable(err error) error {
	var nf *debcache.NotFetchable
	if errors.As(err, &nf) {
		return nf.Reason
	}
	return err
}

// writeDebTar writes the archives as apt leaves its downloads: root's,
// mode 0644, under apt's file names, checking each against its sha256 as
// it goes. The check is the guard: apt 2.6 takes an archive it finds in
// its archives directory on its size alone, without hashing it.
func writeDebTar(ctx context.Context, rs []debcache.Result, w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, r := range rs {
		f, err := os.Open(r.Path)
		if err != nil {
			return err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: "./" + r.Deb.Filename, Mode: 0o644, Size: r.Deb.Size,
			Uname: "root", Gname: "root", ModTime: debMTime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return err
		}
		d, err := digest.Copy(ctx, tw, io.LimitReader(f, r.Deb.Size), nil)
		f.Close()
		if err != nil {
			return err
		}
		if d.Size != r.Deb.Size || !d.Matches(r.Deb.SHA256) {
			return fmt.Errorf("the package cache's %s changed while it was read", r.Deb.Filename)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return tw.Close()
}

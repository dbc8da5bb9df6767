package release_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// A tgz on the local disk goes through the same rule as a stored version:
// verified, then uploaded; without a key, or with the wrong one, or
// unsigned, nothing reaches MAAS.
func TestUploadFileVerifiesFirst(t *testing.T) {
	f := newFixture(t)
	signed, _ := storetest.Artifact(t, t.TempDir(), "demo", "1.0.0", storetest.Options{Signer: f.signer})
	unsigned, _ := storetest.Artifact(t, t.TempDir(), "demo", "2.0.0", storetest.Options{})
	_, otherPub := storetest.Keys(t, t.TempDir())
	other, _ := signing.LoadPublicKeyFile(otherPub)
	for _, tc := range []struct {
		name, tgz string
		adjust    func(*release.Options)
		want      string
	}{
		{name: "no key", tgz: signed, adjust: func(o *release.Options) { o.Verifier = nil }, want: release.ErrNoVerifyKey.Error()},
		{name: "other key", tgz: signed, adjust: func(o *release.Options) { o.Verifier = other }, want: "signature does not match"},
		{name: "unsigned", tgz: unsigned, want: "is not signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.opts
			if tc.adjust != nil {
				tc.adjust(&o)
			}
			_, err := release.UploadFile(ctx, tc.tgz, o, release.FileOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if tc.name == "no key" && !errors.Is(err, release.ErrNoVerifyKey) {
				t.Errorf("err %v is not ErrNoVerifyKey", err)
			}
			for _, op := range []maassim.Op{maassim.OpList, maassim.OpCreate, maassim.OpChunk, maassim.OpLastChunk} {
				if n := f.sim.Count(op); n != 0 {
					t.Errorf("%d %s requests reached MAAS", n, op)
				}
			}
		})
	}
	res, err := release.UploadFile(ctx, signed, f.opts, release.FileOptions{Name: "custom/other"})
	if err != nil || !res.Verified || res.Upload.Skipped || res.Site != "sim" || res.DistroSeries != "custom/other-1-0-0" || res.Image != "" {
		t.Fatalf("signed: %+v %v", res, err)
	}
	if again, err := release.UploadFile(ctx, signed, f.opts, release.FileOptions{Name: "custom/other"}); err != nil || !again.Upload.Skipped {
		t.Errorf("again: %+v %v", again, err)
	}
	// Unsigned goes through only when verification is skipped explicitly.
	o := f.opts
	o.Verifier, o.InsecureSkipVerify = nil, true
	res, err = release.UploadFile(ctx, unsigned, o, release.FileOptions{})
	if err != nil || res.Verified || res.DistroSeries != "custom/demo-2-0-0" {
		t.Fatalf("insecure: %+v %v", res, err)
	}
}

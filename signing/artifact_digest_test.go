package signing_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/signing"
)

func TestVerifyArtifactDigest(t *testing.T) {
	k := newKeys(t)
	_, tgz, man := signedArtifact(t, k)
	d, err := digest.File(context.Background(), tgz)
	if err != nil {
		t.Fatal(err)
	}
	// The tgz need not be there: only its signatures are read.
	if err := os.Remove(tgz); err != nil {
		t.Fatal(err)
	}
	r, err := signing.VerifyArtifactDigest(context.Background(), k.verifier, tgz, d.Hex(), d.Size, man)
	if err != nil || !r.Verified || r.SHA256 != d.Hex() || r.Size != d.Size {
		t.Fatalf("report %+v, err %v", r, err)
	}
	// Another digest: neither the signature nor the manifest match it.
	other := digest.Bytes([]byte("other"))
	r, err = signing.VerifyArtifactDigest(context.Background(), k.verifier, tgz, other.Hex(), d.Size, man)
	if err != nil || r.Verified || !strings.Contains(r.Err().Error(), "manifest matches tarball") {
		t.Fatalf("report %+v, err %v", r, err)
	}
	if _, err := signing.VerifyArtifactDigest(context.Background(), k.verifier, tgz, "nothex", d.Size, man); err == nil {
		t.Fatal("a malformed sha256 verified")
	}
}

package signing_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/signing"
)

// TestEmptySignature: an empty .sig was reported as "signed with another
// key"; it is reported as empty, and so is an empty bundle.
func TestEmptySignature(t *testing.T) {
	k := newKeys(t)
	for _, ext := range []string{".sig", ".sigstore.json"} {
		_, tgz, man := signedArtifact(t, k)
		if err := os.WriteFile(tgz+ext, []byte("\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := signing.VerifyArtifact(context.Background(), k.verifier, tgz, man)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Err()
		if err == nil || !strings.Contains(err.Error(), tgz+ext+": the ") || !strings.Contains(err.Error(), "file is empty: it holds no signature of "+tgz) ||
			strings.Contains(err.Error(), "another key") {
			t.Errorf("%s: %v", ext, err)
		}
	}
}

// TestAttestationFIFO: a FIFO as a DSSE envelope blocked the verification
// forever; it is refused at once.
func TestAttestationFIFO(t *testing.T) {
	k := newKeys(t)
	fifo := filepath.Join(t.TempDir(), "x.spdx.dsse.json")
	testenv.Mkfifo(t, fifo)
	done := make(chan error, 1)
	go func() {
		_, err := k.verifier.VerifyAttestation(context.Background(), fifo, strings.Repeat("0", 64), "https://spdx.dev/Document")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, readlimit.ErrNotRegular) || !strings.Contains(err.Error(), fifo+": not a regular file (a FIFO)") {
			t.Errorf("%v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting on the FIFO")
	}
}

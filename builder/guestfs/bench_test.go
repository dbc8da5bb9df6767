//go:build guestfs

package guestfs

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpuaas/imagectl/builder"
)

// BenchmarkPack compares, on the test base image, ways of turning its root
// filesystem into a gzip'd tar, each including its appliance launch:
//
//   - imagectl: one session, tar-out with xattrs streamed through the
//     repacker (PAX, numeric owners, pgzip, sha256 in the same pass);
//   - guestfish: tar-out with xattrs and numeric owners piped to gzip -6;
//   - virt-tar-out piped to gzip -6: the old pipeline (it loses xattrs);
//   - host: tar --xattrs | pigz of the same tree extracted on the host
//     (the extraction is not timed).
//
// Run with -benchtime 1x: each iteration takes tens of seconds under TCG.
func BenchmarkPack(b *testing.B) {
	vars := os.Getenv("IMAGECTL_TEST_BASE_VARS")
	if vars == "" {
		b.Skip("IMAGECTL_TEST_BASE_VARS is not set (make bench sets it)")
	}
	base, _ := baseImageFrom(b, vars)
	ctx := context.Background()
	accel, err := Accelerator(ctx, "auto", nil)
	if err != nil {
		b.Fatal(err)
	}
	env := os.Environ()
	if accel == "tcg" {
		env = append(env, "LIBGUESTFS_BACKEND_SETTINGS=force_tcg")
	}
	shell := func(b *testing.B, script string) {
		cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", script, err, out)
		}
	}

	b.Run("imagectl", func(b *testing.B) {
		for b.Loop() {
			overlay := filepath.Join(b.TempDir(), "o.qcow2")
			shell(b, "qemu-img create -q -f qcow2 -F qcow2 -b "+base+" "+overlay)
			sess, err := Executor{}.Open(ctx, overlay, builder.SessionOptions{Accel: accel})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := builder.PackSession(ctx, sess, io.Discard, 6); err != nil {
				b.Fatal(err)
			}
			sess.Close()
		}
	})
	b.Run("guestfish-tar-out-gzip", func(b *testing.B) {
		for b.Loop() {
			shell(b, "guestfish --ro -a "+base+" -i tar-out / - xattrs:true numericowner:true | gzip -6 > /dev/null")
		}
	})
	b.Run("virt-tar-out-gzip", func(b *testing.B) {
		for b.Loop() {
			shell(b, "virt-tar-out -a "+base+" / - | gzip -6 > /dev/null")
		}
	})
	b.Run("host-tar-pigz", func(b *testing.B) {
		if _, err := exec.LookPath("pigz"); err != nil {
			b.Skip("pigz is not installed")
		}
		tree := b.TempDir()
		shell(b, "guestfish --ro -a "+base+" -i tar-out / - xattrs:true numericowner:true | tar -C "+tree+" --xattrs --xattrs-include='*' --numeric-owner -xpf -")
		b.ResetTimer()
		for b.Loop() {
			shell(b, "tar -C "+tree+" --xattrs --xattrs-include='*' --numeric-owner -cf - . | pigz -6 > /dev/null")
		}
	})
}

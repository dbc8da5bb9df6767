package sbom

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/pgzip"
)

var (
	benchOnce sync.Once
	benchTgz  string
	benchErr  error
)

// benchImage writes, once per run, a 128 MiB root filesystem tgz shaped
// like a host image: 2,000 packages in the dpkg database, a DEP-5
// copyright file each, and 16,000 other files of half-compressible bytes;
// b's bytes per operation are its size.
func benchImage(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "imagectl-sbom-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchTgz = filepath.Join(dir, "image.tgz")
		benchErr = writeBenchImage(benchTgz)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	st, err := os.Stat(benchTgz)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	return benchTgz
}

func writeBenchImage(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	add := func(name string, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	var status strings.Builder
	for i := range 2000 {
		name := fmt.Sprintf("pkg%04d", i)
		fmt.Fprintf(&status, "Package: %s\nStatus: install ok installed\nArchitecture: amd64\nSource: src%d (1.%d-1)\nVersion: 1.%d-1\nMaintainer: M <m@example.com>\nDescription: d\n line\n\n", name, i/4, i, i)
		c := fmt.Sprintf("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nCopyright: someone\nLicense: GPL-2+\n\nFiles: lib/*\nLicense: BSD-3-clause\n%s", strings.Repeat(" text of the license\n", 100))
		if err := add("./usr/share/doc/"+name+"/copyright", []byte(c)); err != nil {
			return err
		}
	}
	if err := add("./var/lib/dpkg/status", []byte(status.String())); err != nil {
		return err
	}
	if err := add("./etc/os-release", []byte("ID=ubuntu\nVERSION_ID=\"24.04\"\n")); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, 8<<10)
	for i := range 16000 {
		for j := 0; j < len(body); j += 2 { // half random: compresses about 2:1
			body[j] = byte(rng.Uint32())
		}
		if err := add(fmt.Sprintf("./usr/lib/x86_64-linux-gnu/f%05d.so", i), body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// BenchmarkScan is Scan of the image: one streaming pass.
func BenchmarkScan(b *testing.B) {
	tgz := benchImage(b)
	for b.Loop() {
		inv, err := Scan(context.Background(), tgz, ScanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(inv.Packages) != 2000 {
			b.Fatalf("%d packages", len(inv.Packages))
		}
	}
}

// BenchmarkReadTgz is the floor any reader of the tgz pays: decompress
// and walk the tar, reading every byte, parsing nothing.
func BenchmarkReadTgz(b *testing.B) {
	tgz := benchImage(b)
	for b.Loop() {
		f, err := os.Open(tgz)
		if err != nil {
			b.Fatal(err)
		}
		zr, err := pgzip.NewReader(f)
		if err != nil {
			b.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			if _, err := tr.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, tr); err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
}

// BenchmarkExtractTgz is the obvious alternative's first step: extract
// the tgz (tar -xzf) so that a tool reading a directory (syft) can scan
// it; the scan itself comes on top.
func BenchmarkExtractTgz(b *testing.B) {
	tgz := benchImage(b)
	for b.Loop() {
		dir := b.TempDir()
		if out, err := exec.Command("tar", "-xzf", tgz, "-C", dir).CombinedOutput(); err != nil {
			b.Fatalf("tar: %v\n%s", err, out)
		}
		os.RemoveAll(dir)
	}
}

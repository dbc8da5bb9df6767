package layercache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// ClusterSize is the unit of change detection and of the deltas.
const ClusterSize = 256 << 10

// Table holds the sha256 of every cluster of a disk.
type Table struct {
	Size   int64 // bytes of the disk
	Hashes [][sha256.Size]byte
}

var zeroHash = sha256.Sum256(make([]byte, ClusterSize))

// hashDisk reads a raw disk image once and hashes its clusters; holes (found
// with SEEK_DATA) are not read.
func hashDisk(ctx context.Context, path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	n := (st.Size() + ClusterSize - 1) / ClusterSize
	t := &Table{Size: st.Size(), Hashes: make([][sha256.Size]byte, n)}
	buf := make([]byte, ClusterSize)
	for i := int64(0); i < n; {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		off := i * ClusterSize
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			data = st.Size() // only a hole is left
		} else if err != nil {
			return nil, fmt.Errorf("seeking data in %s: %w", path, err)
		}
		for ; i < n && (i+1)*ClusterSize <= data; i++ {
			t.Hashes[i] = zeroHash
		}
		if i >= n {
			break
		}
		off = i * ClusterSize
		k, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		clear(buf[k:])
		t.Hashes[i] = sha256.Sum256(buf)
		i++
	}
	return t, nil
}

// marshal encodes the table: the disk size, then the hashes.
func (t *Table) marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "imagectl-cluster-table v1 %d %d\n", t.Size, ClusterSize)
	for _, h := range t.Hashes {
		b.Write(h[:])
	}
	return b.Bytes()
}

// Digest identifies the disk state the table describes.
func (t *Table) Digest() string {
	return digest.Bytes(t.marshal()).String()
}

// maxTable is the largest table read: 65 bytes a 256 KiB cluster, 260 MB
// for a 1 TiB disk.
const maxTable = 512 << 20

func readTable(path string) (*Table, error) {
	b, err := readlimit.File(path, maxTable)
	if err != nil {
		return nil, err
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, errors.New("no table header")
	}
	var size, cluster int64
	if _, err := fmt.Sscanf(string(b[:i]), "imagectl-cluster-table v1 %d %d", &size, &cluster); err != nil {
		return nil, fmt.Errorf("table header: %w", err)
	}
	body := b[i+1:]
	n := (size + ClusterSize - 1) / ClusterSize
	if cluster != ClusterSize || int64(len(body)) != n*sha256.Size {
		return nil, fmt.Errorf("table of %d bytes for a %d-byte disk in %d-byte clusters", len(body), size, cluster)
	}
	t := &Table{Size: size, Hashes: make([][sha256.Size]byte, n)}
	for k := range t.Hashes {
		copy(t.Hashes[k][:], body[k*sha256.Size:])
	}
	return t, nil
}

package ext4tar

import (
	"fmt"
	"io"
)

// fileReader reads a regular file's bytes from its extent map, as the
// kernel would: holes and unwritten extents read as zeros, extents past the
// end of the file are ignored, and exactly size bytes come out.
type fileReader struct {
	fs   *rawFS
	ex   []extent
	size uint64
	pos  uint64
}

func (f *rawFS) open(ri *rawInode) (*fileReader, error) {
	if ri.size == 0 {
		return &fileReader{fs: f}, nil
	}
	ex, err := f.extents(ri)
	if err != nil {
		return nil, err
	}
	return &fileReader{fs: f, ex: ex, size: ri.size}, nil
}

func (r *fileReader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if uint64(len(p)) > r.size-r.pos {
		p = p[:r.size-r.pos]
	}
	bs := r.fs.blockSize
	// Drop extents that end before pos.
	for len(r.ex) > 0 && (r.ex[0].lblk+r.ex[0].len)*bs <= r.pos {
		r.ex = r.ex[1:]
	}
	if len(r.ex) == 0 || r.ex[0].lblk*bs > r.pos {
		// A hole up to the next extent or the end of the file.
		end := r.size
		if len(r.ex) > 0 {
			end = min(end, r.ex[0].lblk*bs)
		}
		n := min(uint64(len(p)), end-r.pos)
		clear(p[:n])
		r.pos += n
		return int(n), nil
	}
	e := r.ex[0]
	end := min(r.size, (e.lblk+e.len)*bs)
	n := min(uint64(len(p)), end-r.pos)
	if e.unwritten {
		clear(p[:n])
	} else {
		off := e.pblk*bs + (r.pos - e.lblk*bs)
		if _, err := r.fs.r.ReadAt(p[:n], int64(off)); err != nil {
			return 0, fmt.Errorf("reading block %d: %w", off/bs, err)
		}
	}
	r.pos += n
	return int(n), nil
}

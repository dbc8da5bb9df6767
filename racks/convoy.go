package racks

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// chunkSize is the piece the streams of a convoy are compared, lent and
// hashed in. Tests make it small.
var chunkSize = 1 << 20

// convoy checks the racks' streams of one check together when there is
// no local copy of the version: one sha256 pass over the bytes they
// served, not one a rack, as with a local copy. The first stream to reach
// a byte of the version lends it: writes it to the spill, an unlinked
// file the size of the version, at its offset. The streams that reach it
// later compare theirs with it there (mapped, as a local copy is), and
// one hasher hashes the spill in chunks, in order, keeping the hash's
// state at each chunk's start. A stream that matched every byte to its
// end has the digest of the spill up to there (the state at its last
// chunk, then that chunk's bytes). A stream that differs from the lent
// bytes, or would lend bytes past the version's size, or meets a spill
// that could not be written, goes on alone: it resumes the hash from the
// state at its chunk, hashes the spill's bytes from there to where it
// is, then the rest of its own, so a rack serving other bytes is still
// named by their sha256. A stream waits for no other rack, whenever it
// starts, but for a lender's write of the bytes it is at and for the
// hasher at its end; memory stays flat (the spill is mapped a window at
// a time). Once every rack of the check has joined or is done, the spill's
// bytes that no stream can need again (behind the hasher and behind the
// chunk each stream still in the convoy is at) are given back to its file
// system (a hole punched): the spill then holds what lies between the
// slowest stream and the fastest, not the whole version, and its pages
// are used again for the next bytes lent instead of new ones (new pages
// cost several times the writing on a virtual machine that hands freed
// memory back to its host: docs/speed.md). Until then it grows up to the
// version's size, as a stream joining late compares from the first byte.
// When the fastest rack serves other bytes, the others differ from what it
// lent and each goes on alone: the check then costs what hashing each
// stream does.
type convoy struct {
	ctx    context.Context
	size   int64
	spill  *os.File
	mu     sync.Mutex
	change chan struct{} // closed and replaced at every change
	// lent bytes are in the spill, from its start; lending is set while
	// a stream writes the next ones. broken, once the spill cannot be
	// written, sends every stream on alone.
	lent    int64
	lending bool
	broken  error
	// The hasher's: the chunks hashed, the hash's state at the start of
	// each chunk up to hashed, and what stopped it.
	hashed  int64
	states  [][]byte
	hashErr error
	stopped bool
	done    chan struct{}
	// racks is how many racks the check has, settled how many of them are
	// done (over), open the streams joined and not closed: when settled
	// and open make racks, no stream can join any more. freed bytes from
	// the spill's start are given back (free); noFree once its file system
	// cannot.
	racks   int
	settled int
	open    map[*joined]struct{}
	freed   int64
	noFree  bool
}

// newConvoy opens the spill for a version of size bytes in dir and starts
// the hasher, until stop or ctx's end, for a check of the given number of
// racks: each joins at most once, and calls over once its fetch is over,
// after it closed its stream.
func newConvoy(ctx context.Context, dir string, size int64, racks int) (*convoy, error) {
	spill, err := openSpill(dir, size)
	if err != nil {
		return nil, err
	}
	return startConvoy(ctx, spill, size, racks), nil
}

// startConvoy starts a convoy's hasher over the spill, until stop or
// ctx's end.
func startConvoy(ctx context.Context, spill *os.File, size int64, racks int) *convoy {
	c := &convoy{ctx: ctx, size: size, spill: spill, change: make(chan struct{}), done: make(chan struct{}),
		racks: racks, open: map[*joined]struct{}{}}
	c.states = append(c.states, marshalHash(sha256.New()))
	go c.hash()
	return c
}

// openSpill is an unlinked file of size bytes (a hole until written) in
// dir, made when missing: O_TMPFILE where the file system has it, else a
// file removed as soon as it is made.
func openSpill(dir string, size int64) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the racks check's spill file: %w", err)
	}
	if err := roomFor(dir, size); err != nil {
		return nil, fmt.Errorf("making the racks check's spill file in %s: %w", dir, err)
	}
	f, err := os.OpenFile(dir, os.O_RDWR|unix.O_TMPFILE, 0o600)
	if err != nil {
		if f, err = os.CreateTemp(dir, ".racks-spill-"); err != nil {
			return nil, fmt.Errorf("making the racks check's spill file in %s: %w", dir, err)
		}
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return nil, fmt.Errorf("making the racks check's spill file in %s: %w", dir, err)
		}
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, fmt.Errorf("making the racks check's spill file in %s: %w", dir, err)
	}
	return f, nil
}

// spillError is a failure of the spill: it says nothing of the rack
// whose stream met it.
type spillError struct{ err error }

func (e *spillError) Error() string { return "the racks check's spill file: " + e.err.Error() }
func (e *spillError) Unwrap() error { return e.err }

// problem is what went wrong with the spill during the check, once it is
// stopped: the streams from where it broke on were each hashed.
func (c *convoy) problem() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return &spillError{c.broken}
	}
	if c.hashErr != nil {
		return &spillError{c.hashErr}
	}
	return nil
}

// roomFor says whether dir can take a spill of size bytes: on a disk, not
// in memory (tmpfs, ramfs: the spill would take the version's size of
// memory), with the size and a tenth more free.
func roomFor(dir string, size int64) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return err
	}
	switch uint32(fs.Type) {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		return errors.New("it is in memory (tmpfs), where the spill would take the version's size of memory")
	}
	unit := uint64(fs.Frsize) // f_bavail counts fragments
	if unit == 0 {
		unit = uint64(fs.Bsize)
	}
	want := uint64(size) + uint64(size)/10
	if unit > 0 && uint64(fs.Bavail) < want/unit+1 {
		return fmt.Errorf("%d bytes free, less than the version's %d and a tenth more", uint64(fs.Bavail)*unit, size)
	}
	return nil
}

// chunkLen is the length of the version's chunk k, 0 past its end.
func (c *convoy) chunkLen(k int64) int {
	return int(max(0, min(int64(chunkSize), c.size-k*int64(chunkSize))))
}

// join is a new stream of the convoy, a rack's (once a rack).
func (c *convoy) join() *joined {
	s := &joined{c: c, lb: newLocalBytes(c.spill, c.size)}
	c.mu.Lock()
	c.open[s] = struct{}{}
	c.mu.Unlock()
	return s
}

// over says a rack's fetch is over, whether it joined or not: it joins no
// more. Nothing on a nil convoy.
func (c *convoy) over() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.settled++
	c.broadcast()
	c.mu.Unlock()
}

// freeable is where the spill's bytes that no stream can need again end:
// none while a rack may still join (it compares from the first byte),
// else those before the hasher and before the chunk of each stream still
// in the convoy (alone hashes that chunk's spilled bytes). Called with mu
// held.
func (c *convoy) freeable() int64 {
	if c.noFree || c.settled+len(c.open) < c.racks {
		return c.freed
	}
	to := min(c.hashed*int64(chunkSize), c.size)
	for s := range c.open {
		if s.h == nil {
			to = min(to, s.off/int64(chunkSize)*int64(chunkSize))
		}
	}
	return max(to, c.freed)
}

// free gives the spill's bytes up to freeable back to its file system, a
// hole punched (reading it gives zeros, which no stream does), so that
// the next bytes lent take the pages those had. A file system that cannot
// punch keeps them, as when nothing is freed. Called by the hasher, with
// mu held, which it lets go of while it punches; only it frees.
func (c *convoy) free() {
	// Again until there is nothing to free: what changed while mu was let
	// go is seen before the hasher waits for the next change.
	for {
		to := c.freeable()
		if to == c.freed || to-c.freed < freeStep && to < c.size {
			return
		}
		c.mu.Unlock()
		var err error = unix.EINTR
		for err == unix.EINTR { // the Go runtime's signals interrupt it
			err = unix.Fallocate(int(c.spill.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, c.freed, to-c.freed)
		}
		c.mu.Lock()
		if err != nil {
			c.noFree = true
			return
		}
		c.freed = to
		c.broadcast()
	}
}

// freeStep is the least the hasher frees at once: a few system calls a
// GiB. Tests make it small.
var freeStep int64 = 8 << 20

// stop ends the hasher and closes the spill, once every stream is done.
func (c *convoy) stop() {
	c.mu.Lock()
	c.stopped = true
	c.broadcast()
	c.mu.Unlock()
	<-c.done
	c.spill.Close()
}

func (c *convoy) hash() {
	defer close(c.done)
	lb := newLocalBytes(c.spill, c.size)
	defer lb.close()
	h := sha256.New()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		// free lets go of mu: stopped is read after it.
		c.free()
		if c.stopped {
			return
		}
		k := c.hashed
		if c.chunkLen(k) == 0 || c.lent < k*int64(chunkSize)+int64(c.chunkLen(k)) {
			// Not lent whole yet.
			if c.wait() != nil {
				return
			}
			continue
		}
		c.mu.Unlock()
		// A lent chunk does not change.
		n, err := lb.hash(c.ctx, h, k*int64(chunkSize), k*int64(chunkSize)+int64(c.chunkLen(k)))
		if err == nil && n != int64(c.chunkLen(k)) {
			err = fmt.Errorf("the spill file ended at byte %d", k*int64(chunkSize)+n)
		}
		st := marshalHash(h)
		c.mu.Lock()
		if err != nil {
			if c.ctx.Err() == nil {
				c.hashErr = fmt.Errorf("hashing it: %w", err)
			}
			c.broadcast()
			return
		}
		c.hashed++
		c.states = append(c.states, st)
		c.broadcast()
	}
}

// broadcast wakes whoever waits for a change. Called with mu held.
func (c *convoy) broadcast() {
	close(c.change)
	c.change = make(chan struct{})
}

// wait waits, with mu held, for the next change or ctx's end.
func (c *convoy) wait() error {
	ch := c.change
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// stateAt is the hash's state at the start of chunk k, waiting for the
// hasher to get there (every byte before the chunk is lent). Called with
// mu held.
func (c *convoy) stateAt(k int64) ([]byte, error) {
	for c.hashed < k {
		if c.hashErr != nil {
			return nil, &spillError{c.hashErr}
		}
		if c.stopped {
			return nil, &spillError{errors.New("its hash stopped")}
		}
		if err := c.waitHeld(); err != nil {
			return nil, err
		}
	}
	return c.states[k], nil
}

// waitHeld is wait while the check holds a stream (its stall watch is
// paused meanwhile, see heldWrites, or stopped once its fetch is over):
// the check's end then is a heldError.
func (c *convoy) waitHeld() error {
	if err := c.wait(); err != nil {
		return &heldError{err}
	}
	return nil
}

// heldError is the check's end (its context's) while it held a stream
// (waiting for the convoy): the rack was not checked to the end in time,
// which says nothing of it.
type heldError struct{ err error }

func (e *heldError) Error() string {
	return "the check ended while it checked the rack's bytes: " + e.err.Error()
}
func (e *heldError) Unwrap() error { return e.err }

// joined is one rack's stream in a convoy.
type joined struct {
	c   *convoy
	lb  *localBytes // the spill's lent bytes
	off int64       // bytes written
	// h is its own hash once it goes on alone; digest and err its end.
	h      hash.Hash
	ended  bool
	digest string
	err    error
}

func (s *joined) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && s.h == nil {
		k, alone, err := s.together(p)
		if err == nil && alone {
			err = s.alone()
		}
		if err != nil {
			return 0, err
		}
		p = p[k:]
	}
	if len(p) > 0 {
		s.h.Write(p)
		s.off += int64(len(p))
	}
	return n, nil
}

// together checks p's first bytes with the convoy: compared with the
// lent bytes, or lent. It returns how many it checked, and alone when s
// goes on alone from there (alone makes its hash).
func (s *joined) together(p []byte) (checked int, alone bool, err error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.broken == nil {
		if s.off < c.lent {
			n := int(min(int64(len(p)), c.lent-s.off, int64(chunkSize)))
			c.mu.Unlock()
			same := n
			err := guarded(func() error {
				lent, err := s.lb.at(s.off, n)
				if err == nil {
					same = sameUpTo(p[:n], lent)
				}
				return err
			})
			c.mu.Lock()
			if err != nil {
				return 0, false, &spillError{fmt.Errorf("reading it: %w", err)}
			}
			if (s.off+int64(same))/int64(chunkSize) != s.off/int64(chunkSize) {
				c.broadcast() // into a new chunk: the hasher may free the last
			}
			s.off += int64(same)
			return same, same < n, nil
		}
		if s.off+int64(len(p)) > c.size {
			break // past the version's size: never lent
		}
		if !c.lending {
			// s.off == lent: s is the first to get here.
			c.lending = true
			c.mu.Unlock()
			_, err := c.spill.WriteAt(p, s.off)
			c.mu.Lock()
			c.lending = false
			if err != nil {
				c.broken = fmt.Errorf("writing it after %d bytes: %w", c.lent, err)
				c.broadcast()
				break
			}
			c.lent += int64(len(p))
			s.off += int64(len(p))
			c.broadcast()
			return len(p), false, nil
		}
		// Another stream lends these bytes now: they are compared once
		// written.
		if err := c.waitHeld(); err != nil {
			return 0, false, err
		}
	}
	return 0, true, nil
}

// alone makes s's own hash of its bytes so far, all lent: the hash's
// state at the start of their last chunk (waiting for the hasher to get
// there), then that chunk's lent bytes up to s.off.
func (s *joined) alone() error {
	c := s.c
	chunk := s.off / int64(chunkSize)
	c.mu.Lock()
	st, err := c.stateAt(chunk)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(st); err != nil {
		return &spillError{fmt.Errorf("resuming its hash: %w", err)}
	}
	from := chunk * int64(chunkSize)
	n, err := s.lb.hash(c.ctx, h, from, s.off)
	if ctxErr := c.ctx.Err(); ctxErr != nil {
		return &heldError{ctxErr}
	}
	if err != nil || n != s.off-from {
		return &spillError{fmt.Errorf("reading it: %d of %d bytes: %v", n, s.off-from, err)}
	}
	// Under mu: the hasher reads it (freeable), and may free s's chunk.
	c.mu.Lock()
	s.h = h
	c.broadcast()
	c.mu.Unlock()
	return nil
}

// end takes the stream's digest; the stream is over.
func (s *joined) end() (string, error) {
	if s.ended {
		return s.digest, s.err
	}
	s.ended = true
	if s.h == nil {
		if s.err = s.alone(); s.err != nil {
			return "", s.err
		}
	}
	s.digest = hex.EncodeToString(s.h.Sum(nil))
	return s.digest, nil
}

func (s *joined) same(want string) bool {
	d, err := s.end()
	return err == nil && d == want
}

func (s *joined) sum() (string, error) { return s.end() }

func (s *joined) partial() string {
	d, _ := s.end()
	return d
}

// close lets go of the spill's mapping; the stream is out of the convoy,
// and what only it needed may be freed: end it first.
func (s *joined) close() {
	s.c.mu.Lock()
	delete(s.c.open, s)
	s.c.broadcast()
	s.c.mu.Unlock()
	s.lb.close()
}

func marshalHash(h hash.Hash) []byte {
	b, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic(err) // crypto/sha256's state always marshals
	}
	return b
}

package racks

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"hash"
	"sync"
	"time"
)

// chunkSize is the piece the streams of a convoy are lent, compared and
// hashed in, and ringChunks how many chunks its ring holds. Tests make
// them small.
var (
	chunkSize  int64 = 1 << 20
	ringChunks int64 = 16
)

// How long a stream that would lend the next bytes waits for a stream
// behind to leave the ring's oldest chunk, before that one goes on
// alone: at most holdMost at once, and over the stream's whole fetch at
// most holdFloor plus holdShare of the time since it joined. Tests change
// them.
var (
	holdFloor = 100 * time.Millisecond
	holdShare = 0.5
	holdMost  = time.Second
)

// convoy checks the racks' streams of one check together when there is
// no local copy of the version: one sha256 pass over the bytes they
// served, not one a rack. The first stream to reach a byte of the version
// lends it: copies it into the convoy's ring, ringChunks chunks of memory
// that hold the version's chunks from the oldest a stream still needs
// (base) on, each in the slot of its number modulo ringChunks. The
// streams that reach it later compare theirs with it there, and one
// hasher hashes the ring's chunks, in order, keeping the hash's state at
// each chunk's start. A stream that matched every byte to its end has the
// digest of the lent bytes up to there (the state at its last chunk, then
// that chunk's bytes). A stream that differs from the lent bytes, or
// would lend bytes past the version's size, goes on alone: it resumes the
// hash from the state at its chunk, hashes the ring's bytes from there to
// where it is, then the rest of its own, so a rack serving other bytes is
// still named by their sha256.
//
// The ring is full when the next bytes to lend are a ringChunks-th chunk
// past base: the oldest chunk must go first. It goes once the hasher is
// past it and no stream compares with it; a stream still in it holds the
// lender back (the racks of one check serve at about one pace, and a
// stream held gives its core to the others), within the hold bounds
// above, and is then sent on alone: the lender hashes its bytes of that
// chunk into its own hash for it. So memory stays flat (the ring, the
// states of the chunks in it), a rack is held back by a slower one for a
// bounded share of its time only (its report says for how long: Held),
// and a rack that stalls holds no other for more than holdMost. A stream
// that joins after the first chunk left the ring (a rack checked after
// others, with more racks than --parallel) hashes its own bytes from the
// start. When the fastest rack serves other bytes, the
// others differ from what it lent and each goes on alone: the check then
// costs what hashing each stream does.
type convoy struct {
	ctx    context.Context
	size   int64
	ring   []byte
	slots  int64
	mu     sync.Mutex
	change chan struct{} // closed and replaced at every change
	// lent bytes are in the ring, from chunk base on (those before left
	// it); lending is set while a stream copies the next ones in, readers
	// counts the streams comparing with each slot, holding the lenders
	// waiting for base to move (the streams wake them as they move).
	lent    int64
	lending bool
	base    int64
	readers []int
	holding int
	// open are the streams joined that neither went alone nor closed.
	open map[*joined]struct{}
	// The hasher's: the chunks hashed, and the hash's state at the start
	// of each chunk from base up to hashed.
	hashed  int64
	states  [][]byte
	stopped bool
	done    chan struct{}
}

// newConvoy starts the convoy of a check of a version of size bytes, its
// hasher running until stop or ctx's end.
func newConvoy(ctx context.Context, size int64) *convoy {
	slots := min(ringChunks, max(1, (size+chunkSize-1)/chunkSize))
	c := &convoy{ctx: ctx, size: size, ring: make([]byte, slots*chunkSize), slots: slots,
		readers: make([]int, slots), open: map[*joined]struct{}{},
		change: make(chan struct{}), done: make(chan struct{})}
	c.states = append(c.states, marshalHash(sha256.New()))
	go c.hash()
	return c
}

// chunkLen is the length of the version's chunk k, 0 past its end.
func (c *convoy) chunkLen(k int64) int64 {
	return max(0, min(chunkSize, c.size-k*chunkSize))
}

// slot is chunk k's place in the ring.
func (c *convoy) slot(k int64) []byte {
	at := k % c.slots * chunkSize
	return c.ring[at : at+chunkSize]
}

// join is a new stream of the convoy, a rack's (once a rack).
func (c *convoy) join() *joined {
	s := &joined{c: c, start: time.Now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base > 0 {
		// The first chunk left the ring: it hashes its own.
		s.h = sha256.New()
		return s
	}
	c.open[s] = struct{}{}
	return s
}

// stop ends the hasher, once every stream is done.
func (c *convoy) stop() {
	c.mu.Lock()
	c.stopped = true
	c.broadcast()
	c.mu.Unlock()
	<-c.done
}

func (c *convoy) hash() {
	defer close(c.done)
	h := sha256.New()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.stopped {
		k := c.hashed
		n := c.chunkLen(k)
		if n == 0 || c.lent < k*chunkSize+n {
			// Not lent whole yet.
			if c.waitHeld(0) != nil {
				return
			}
			continue
		}
		c.mu.Unlock()
		// A lent chunk does not change, nor leave the ring before it is
		// hashed.
		h.Write(c.slot(k)[:n])
		st := marshalHash(h)
		c.mu.Lock()
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

// wakeLenders broadcasts when a lender waits for a stream to move on,
// compare, go alone or close (advance): nobody else waits for those.
// Called with mu held.
func (c *convoy) wakeLenders() {
	if c.holding > 0 {
		c.broadcast()
	}
}

// waitHeld waits, with mu held, for the next change or ctx's end, no
// longer than most when most > 0. The check holds a stream meanwhile (its
// stall watch is paused, see heldWrites): the check's end then is a
// heldError.
func (c *convoy) waitHeld(most time.Duration) error {
	ch := c.change
	c.mu.Unlock()
	defer c.mu.Lock()
	var timeout <-chan time.Time
	if most > 0 {
		t := time.NewTimer(most)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ch:
	case <-timeout:
	case <-c.ctx.Done():
		return &heldError{c.ctx.Err()}
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

// resumed is a hash resumed from state (marshaled by crypto/sha256),
// then fed rest.
func resumed(state, rest []byte) hash.Hash {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		panic(err) // a state crypto/sha256 marshaled
	}
	h.Write(rest)
	return h
}

// advance moves the ring on for the lender s, which needs the slot of
// its oldest chunk: it lets the chunk go once the hasher is past it and no
// stream compares with it. A stream still in it holds s back as the hold
// bounds allow, and is then sent on alone. Else it waits for a change:
// the caller looks again (another lender may have moved the ring on).
// Called with mu held.
func (c *convoy) advance(s *joined) error {
	// Streams that compare, go alone or close wake it.
	c.holding++
	defer func() { c.holding-- }()
	if c.hashed <= c.base || c.readers[c.base%c.slots] > 0 {
		return c.waitHeld(0)
	}
	end := (c.base + 1) * chunkSize
	var behind []*joined
	for o := range c.open {
		if o.off < end {
			behind = append(behind, o)
		}
	}
	if len(behind) > 0 {
		now := time.Now()
		if s.holdBase != c.base || s.holdSince.IsZero() {
			s.holdBase, s.holdSince = c.base, now
		}
		share := holdFloor + time.Duration(holdShare*float64(now.Sub(s.start))) - s.held
		if most := min(holdMost-now.Sub(s.holdSince), share); most > 0 {
			err := c.waitHeld(most)
			s.held += time.Since(now)
			return err
		}
		for _, o := range behind {
			// Under mu: o may move on otherwise.
			o.sent = resumed(c.states[0], c.slot(c.base)[:o.off-c.base*chunkSize])
			delete(c.open, o)
		}
	}
	c.base++
	c.states = c.states[1:]
	c.broadcast()
	return nil
}

// joined is one rack's stream in a convoy.
type joined struct {
	c     *convoy
	start time.Time
	off   int64 // bytes written
	// held is how long it waited for streams behind, as a lender; it
	// has waited since holdSince for chunk holdBase to leave the ring.
	held      time.Duration
	holdSince time.Time
	holdBase  int64
	// sent is its hash when a lender sent it on alone; h is its own hash
	// once it goes on alone; digest and err its end.
	sent   hash.Hash
	h      hash.Hash
	ended  bool
	digest string
	err    error
}

func (s *joined) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && s.h == nil {
		k, err := s.together(p)
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
// lent bytes, or lent. It returns how many it checked; when s goes on
// alone from there, s.h is set.
func (s *joined) together(p []byte) (checked int, err error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if s.sent != nil {
			return 0, s.alone()
		}
		chunk := s.off / chunkSize
		chunkEnd := (chunk + 1) * chunkSize
		if s.off < c.lent {
			n := int(min(int64(len(p)), c.lent-s.off, chunkEnd-s.off))
			slot := chunk % c.slots
			c.readers[slot]++
			c.mu.Unlock()
			at := s.off - chunk*chunkSize
			same := sameUpTo(p[:n], c.slot(chunk)[at:at+int64(n)])
			c.mu.Lock()
			c.readers[slot]--
			s.off += int64(same)
			c.wakeLenders()
			if same < n {
				return same, s.alone()
			}
			return same, nil
		}
		if s.off+int64(len(p)) > c.size {
			return 0, s.alone() // past the version's size: never lent
		}
		if !c.lending {
			// s.off == lent: s is the first to get here.
			if chunk >= c.base+c.slots {
				if err := c.advance(s); err != nil {
					return 0, err
				}
				continue
			}
			n := int(min(int64(len(p)), chunkEnd-s.off))
			c.lending = true
			c.mu.Unlock()
			copy(c.slot(chunk)[s.off-chunk*chunkSize:], p[:n])
			c.mu.Lock()
			c.lending = false
			c.lent += int64(n)
			s.off += int64(n)
			c.broadcast()
			return n, nil
		}
		// Another stream lends these bytes now: they are compared once
		// copied.
		if err := c.waitHeld(0); err != nil {
			return 0, err
		}
	}
}

// alone makes s's own hash of its bytes so far, all lent: the one a
// lender made when it sent s on alone, else the hash's state at the start
// of their last chunk (waiting for the hasher to get there), then that
// chunk's bytes up to s.off. s is out of the convoy then. Called with mu
// held.
func (s *joined) alone() error {
	c := s.c
	chunk := s.off / chunkSize
	for s.sent == nil && c.hashed < chunk {
		if c.stopped {
			return &heldError{errors.New("the racks' convoy stopped before the stream ended")}
		}
		if err := c.waitHeld(0); err != nil {
			return err
		}
	}
	if s.h = s.sent; s.h == nil {
		// Outside mu: the chunk stays in the ring while it is read.
		state, slot := c.states[chunk-c.base], chunk%c.slots
		c.readers[slot]++
		c.mu.Unlock()
		h := resumed(state, c.slot(chunk)[:s.off-chunk*chunkSize])
		c.mu.Lock()
		c.readers[slot]--
		s.h = h
	}
	delete(c.open, s)
	c.wakeLenders()
	return nil
}

// end takes the stream's digest; the stream is over.
func (s *joined) end() (string, error) {
	if s.ended {
		return s.digest, s.err
	}
	s.ended = true
	if s.h == nil {
		s.c.mu.Lock()
		s.err = s.alone()
		s.c.mu.Unlock()
		if s.err != nil {
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

// close takes the stream out of the convoy: what only it needed may
// leave the ring. End it first.
func (s *joined) close() {
	s.c.mu.Lock()
	delete(s.c.open, s)
	s.c.wakeLenders()
	s.c.mu.Unlock()
}

func marshalHash(h hash.Hash) []byte {
	b, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic(err) // crypto/sha256's state always marshals
	}
	return b
}

package racks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// feed writes stream into s in pieces of random sizes up to most, then
// ends it: its digest.
func feed(s *joined, stream []byte, rnd *rand.Rand, most int) (string, error) {
	defer s.close()
	for rest := stream; len(rest) > 0; {
		n := min(len(rest), 1+rnd.IntN(most))
		if w, err := s.Write(rest[:n]); err != nil || w != n {
			return "", fmt.Errorf("wrote %d of %d: %v", w, n, err)
		}
		rest = rest[n:]
	}
	return s.sum()
}

func sumOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// convoyOf sets the convoy's sizes and hold bounds for a test, and puts
// them back after it.
func convoyOf(t *testing.T, chunk, ring int64, floor, most time.Duration, share float64) {
	t.Helper()
	c, r, f, m, s := chunkSize, ringChunks, holdFloor, holdMost, holdShare
	t.Cleanup(func() { chunkSize, ringChunks, holdFloor, holdMost, holdShare = c, r, f, m, s })
	chunkSize, ringChunks, holdFloor, holdMost, holdShare = chunk, ring, floor, most, share
}

// Racks fetched at once, each stream cut into writes its own way, each get
// the digest of what they served, whether they served the version or
// differ from it anywhere, end early or go on past it, kept together or
// sent on alone by a lender they held too long: the ring is 3 chunks, the
// holds a few milliseconds.
func TestConvoyGivesEachStreamItsOwnDigest(t *testing.T) {
	convoyOf(t, 4096, 3, time.Millisecond, 5*time.Millisecond, 0.25)
	const size = 10*4096 + 123
	version := randomBytes(size, 7)
	flip := func(at int) []byte { return flipped(version, at) }
	streams := map[string][]byte{
		"the version":                   version,
		"the version too":               version,
		"the version, a third":          version,
		"first byte differs":            flip(0),
		"a chunk's first byte differs":  flip(3 * 4096),
		"a chunk's last byte differs":   flip(3*4096 - 1),
		"the last byte differs":         flip(size - 1),
		"shorter":                       version[:size-200],
		"ends at a chunk":               version[:5*4096],
		"longer":                        append(bytes.Clone(version), 9),
		"empty":                         nil,
		"another version of the length": bytes.Repeat([]byte{1}, size),
	}
	for round := range 20 {
		c := newConvoy(context.Background(), size)
		if len(c.ring) != 3*4096 {
			t.Fatalf("a ring of %d bytes, want 3 chunks", len(c.ring))
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[string]string{}
		for name, stream := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(len(name))))
				d, err := feed(c.join(), stream, r, 3*4096)
				if err != nil {
					t.Errorf("round %d, %s: %v", round, name, err)
				}
				mu.Lock()
				got[name] = d
				mu.Unlock()
			}()
		}
		wg.Wait()
		c.stop()
		for name, stream := range streams {
			if got[name] != sumOf(stream) {
				t.Errorf("round %d, %s: digest %s, want %s", round, name, got[name], sumOf(stream))
			}
		}
		if c.lent > size {
			t.Errorf("round %d: %d bytes lent, more than the version's %d", round, c.lent, size)
		}
	}
}

// A stream that starts when the others are done compares with what they
// left while the version fits the ring; once its first chunk has left the
// ring, a late stream hashes its own bytes from the start. Either way its
// digest is that of its bytes.
func TestConvoyLateStream(t *testing.T) {
	convoyOf(t, 1024, 8, time.Minute, time.Minute, 0.25)
	rnd := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		name    string
		size    int
		compare bool
	}{{"the version fits the ring", 8000, true}, {"it does not", 20_000, false}} {
		version := randomBytes(tc.size, 3)
		c := newConvoy(context.Background(), int64(tc.size))
		if d, err := feed(c.join(), version, rnd, 700); err != nil || d != sumOf(version) {
			t.Fatalf("%s: first: %s, %v", tc.name, d, err)
		}
		late := c.join()
		other := flipped(version, 5000)
		if _, err := late.Write(other[:5000]); err != nil || (late.h == nil) != tc.compare {
			t.Fatalf("%s: late, before its bytes differ: compared %v, want %v (%v)", tc.name, late.h == nil, tc.compare, err)
		}
		if d, err := feed(late, other[5000:], rnd, 700); err != nil || late.off != int64(tc.size) || d != sumOf(other) {
			t.Fatalf("%s: late, other bytes: %s, %v", tc.name, d, err)
		}
		c.stop()
		if c.lent != int64(tc.size) {
			t.Errorf("%s: %d bytes lent, want %d", tc.name, c.lent, tc.size)
		}
	}
}

// A lender held by a stream behind stops with the context, and the
// convoy's hasher stops with it.
func TestConvoyStopsWithTheContext(t *testing.T) {
	convoyOf(t, 1024, 4, time.Minute, time.Minute, 0.25)
	ctx, cancel := context.WithCancel(context.Background())
	version := randomBytes(64<<10, 5)
	c := newConvoy(ctx, int64(len(version)))
	behind, ahead := c.join(), c.join()
	if _, err := behind.Write(version[:100]); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// The ring is full after 4 chunks: ahead waits for behind.
		_, err := ahead.Write(version)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		var held *heldError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &held) {
			t.Fatalf("a lender held by a stream behind: %v, want the context's error while the check held the stream", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lender held by a stream behind did not stop with the context")
	}
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the convoy's hasher did not stop with the context")
	}
	behind.close()
	ahead.close()
	c.stop()
}

// Streams of the same bytes never go alone: the version is lent and
// hashed once, whichever stream gets ahead, through a ring of 4 chunks.
func TestConvoyHashesTheSameBytesOnce(t *testing.T) {
	convoyOf(t, 4096, 4, time.Minute, time.Minute, 0.25)
	version := bytes.Repeat([]byte("imagectl"), 10_000)
	size := int64(len(version))
	c := newConvoy(context.Background(), size)
	var wg sync.WaitGroup
	streams := make([]*joined, 4)
	for i := range streams {
		// All join before any writes: one that joined after the first
		// chunk left the ring would hash its own (TestConvoyLateStream).
		streams[i] = c.join()
	}
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(i), 9))
			for rest := version; len(rest) > 0; {
				n := min(len(rest), 1+rnd.IntN(10_000))
				if _, err := streams[i].Write(rest[:n]); err != nil {
					t.Error(err)
					return
				}
				rest = rest[n:]
			}
		}()
	}
	wg.Wait()
	for i, s := range streams {
		endedTogether(t, fmt.Sprintf("stream %d", i), s, version)
		s.close()
	}
	c.stop()
	if want := (size + 4095) / 4096; c.lent != size || c.hashed != want {
		t.Errorf("%d bytes lent, %d chunks hashed; want %d, %d", c.lent, c.hashed, size, want)
	}
}

// endedTogether fails t unless s never went alone and its digest is
// version's.
func endedTogether(t *testing.T, name string, s *joined, version []byte) {
	t.Helper()
	if s.h != nil {
		t.Errorf("%s went alone at byte %d", name, s.off)
	}
	if d, err := s.sum(); err != nil || d != sumOf(version) {
		t.Errorf("%s: %s, %v", name, d, err)
	}
}

// A stream that stops in the ring's oldest chunk holds the lender for
// at most holdMost at once, or holdFloor and holdShare of the lender's
// time in all, whichever is less; then it is sent on alone, and when it
// goes on, its digest is still that of its bytes.
func TestConvoySendsAStreamThatHoldsTooLongAlone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		floor, most time.Duration
	}{{"at once", time.Minute, 50 * time.Millisecond}, {"in all", 50 * time.Millisecond, time.Minute}} {
		t.Run(tc.name, func(t *testing.T) {
			convoyOf(t, 1024, 4, tc.floor, tc.most, 0)
			version := randomBytes(64<<10, 6)
			c := newConvoy(context.Background(), int64(len(version)))
			stalled, ahead := c.join(), c.join()
			if _, err := stalled.Write(version[:1500]); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if d, err := feed(ahead, version, rand.New(rand.NewPCG(2, 2)), 3000); err != nil || d != sumOf(version) {
				t.Fatalf("ahead: %s, %v", d, err)
			}
			took := time.Since(start)
			if ahead.held < 50*time.Millisecond || took > 5*time.Second {
				t.Errorf("the lender was held %v and took %v, want 50 ms held, then sent the stream behind alone", ahead.held, took)
			}
			c.mu.Lock()
			sent := stalled.sent != nil
			c.mu.Unlock()
			if !sent {
				t.Fatal("the stalled stream was not sent on alone")
			}
			other := flipped(version, 30_000)
			if d, err := feed(stalled, other[1500:], rand.New(rand.NewPCG(3, 3)), 3000); err != nil || d != sumOf(other) {
				t.Fatalf("stalled, then other bytes: %s, %v", d, err)
			}
			c.stop()
		})
	}
}

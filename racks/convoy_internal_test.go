package racks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
	"golang.org/x/sys/unix"
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

// Racks fetched at once, each stream cut into writes its own way, each get
// the digest of what they served, whether they served the version or
// differ from it anywhere, end early or go on past it; the version's
// bytes are spilled once, and freed behind the streams as they go.
func TestConvoyGivesEachStreamItsOwnDigest(t *testing.T) {
	defer func(c int, f int64) { chunkSize, freeStep = c, f }(chunkSize, freeStep)
	chunkSize, freeStep = 4096, 4096
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
		c, err := newConvoy(context.Background(), t.TempDir(), size, len(streams))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[string]string{}
		for name, stream := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.over()
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
		// Every rack is over: all that was spilled is freed (where the
		// file system can punch holes: TestConvoyFreesWhatNoStreamNeeds).
		waitForConvoy(t, c, fmt.Sprintf("round %d: all freed", round), func() bool { return c.freed == size || c.noFree })
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

// A stream that starts when the others are done compares with the spill
// they left; one whose spill cannot be written goes on alone, with the
// right digest.
func TestConvoyLateStreamAndBrokenSpill(t *testing.T) {
	defer func(c int) { chunkSize = c }(chunkSize)
	chunkSize = 1024
	version := bytes.Repeat([]byte("rack"), 2000)
	size := int64(len(version))
	rnd := rand.New(rand.NewPCG(1, 1))

	c, err := newConvoy(context.Background(), t.TempDir(), size, 2) // the first rack and the late one
	if err != nil {
		t.Fatal(err)
	}
	if d, err := feed(c.join(), version, rnd, 700); err != nil || d != sumOf(version) {
		t.Fatalf("first: %s, %v", d, err)
	}
	late := c.join()
	other := bytes.Clone(version)
	other[5000] = 'x'
	if _, err := late.Write(other[:5000]); err != nil || late.h != nil {
		t.Fatalf("late: went alone before it differed (%v)", err)
	}
	if d, err := feed(late, other[5000:], rnd, 700); err != nil || late.off != size || d != sumOf(other) {
		t.Fatalf("late, other bytes: %s, %v", d, err)
	}
	c.mu.Lock()
	lent := c.lent
	c.mu.Unlock()
	if lent != size {
		t.Errorf("%d bytes lent, want %d", lent, size)
	}
	c.stop()

	// The spill opened read-only: the first write fails.
	spill, err := openSpill(t.TempDir(), size)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", spill.Fd()))
	spill.Close()
	if err != nil {
		testenv.Missing(t, "no /proc/self/fd to reopen the spill read-only: "+err.Error())
	}
	c = startConvoy(context.Background(), ro, size, 1)
	if d, err := feed(c.join(), version, rnd, 700); err != nil || d != sumOf(version) {
		t.Fatalf("broken spill: %s, %v", d, err)
	}
	c.stop()
	if err := c.problem(); err == nil || !strings.Contains(err.Error(), "spill file: writing it after 0 bytes") {
		t.Errorf("writing a read-only spill: %v", err)
	}
}

// A spill is made only on a disk with room for the version.
func TestSpillNeedsRoomOnADisk(t *testing.T) {
	if _, err := openSpill(t.TempDir(), 1<<62); err == nil || !strings.Contains(err.Error(), "bytes free, less than the version's") {
		t.Errorf("a spill larger than its disk: %v", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fs); err != nil || int64(fs.Type) != unix.TMPFS_MAGIC {
		testenv.Missing(t, "no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "racks-spill-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if _, err := openSpill(dir, 1<<20); err == nil || !strings.Contains(err.Error(), "in memory (tmpfs)") {
		t.Errorf("a spill on a tmpfs: %v", err)
	}
}

// A stream waiting for the convoy's hash stops with the context, and the
// convoy stops after it.
func TestConvoyStopsWithTheContext(t *testing.T) {
	defer func(c int) { chunkSize = c }(chunkSize)
	chunkSize = 1024
	ctx, cancel := context.WithCancel(context.Background())
	c, err := newConvoy(ctx, t.TempDir(), 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := c.join()
	if _, err := s.Write(make([]byte, 10_000)); err != nil {
		t.Fatal(err)
	}
	if s.lb.fd < 0 {
		t.Error("the spill is read, not mapped")
	}
	done := make(chan error, 1)
	go func() {
		// Chunk 1000 is never lent: only the context ends the wait.
		c.mu.Lock()
		_, err := c.stateAt(1000)
		c.mu.Unlock()
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		var held *heldError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &held) {
			t.Fatalf("waiting for a chunk never lent: %v, want the context's error while the check held the stream", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a wait for the hash did not stop with the context")
	}
	// The hasher stops with the context too, before stop is called.
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the convoy's hasher did not stop with the context")
	}
	s.close()
	c.stop()
}

// Streams of the same bytes never go alone: the version is spilled and
// hashed once, whichever stream gets ahead.
func TestConvoyHashesTheSameBytesOnce(t *testing.T) {
	defer func(c int) { chunkSize = c }(chunkSize)
	chunkSize = 4096
	version := bytes.Repeat([]byte("imagectl"), 10_000)
	size := int64(len(version))
	c, err := newConvoy(context.Background(), t.TempDir(), size, 4)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	streams := make([]*joined, 4)
	for i := range streams {
		streams[i] = c.join()
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

// waitForConvoy waits for c to be as cond says (called with c.mu held),
// or fails.
func waitForConvoy(t *testing.T, c *convoy, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond() {
		ch := c.change
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			c.mu.Lock()
			t.Fatalf("%s: not so in 10 s (freed %d, hashed %d chunks, %d racks settled of %d, %d open, cannot free: %v, hash error %v, broken %v)", what, c.freed, c.hashed, c.settled, c.racks, len(c.open), c.noFree, c.hashErr, c.broken)
		}
		c.mu.Lock()
	}
}

// Once no rack can join any more, the spill's bytes behind the hash and
// behind every stream's chunk are given back to the file system; a rack
// that may still join keeps them all, and a stream behind keeps its
// chunk and what follows.
func TestConvoyFreesWhatNoStreamNeeds(t *testing.T) {
	c, version := punchingConvoy(t, 3, 3)
	size := int64(len(version))
	waitFor := func(what string, cond func() bool) { t.Helper(); waitForConvoy(t, c, what, cond) }
	ahead, behind := c.join(), c.join()
	rnd := rand.New(rand.NewPCG(3, 3))
	write := func(s *joined, b []byte) {
		t.Helper()
		for len(b) > 0 {
			n := min(len(b), 1+rnd.IntN(5000))
			if _, err := s.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
	}
	write(ahead, version)
	const at = 40*4096 + 100 // behind's place: in chunk 40
	write(behind, version[:at])
	waitFor("every chunk hashed", func() bool { return c.hashed == punchChunks })
	c.mu.Lock()
	freed := c.freed
	c.mu.Unlock()
	if freed != 0 {
		t.Fatalf("%d bytes freed while a third rack may still join", freed)
	}

	c.over() // the third rack is done without joining
	waitFor("the bytes before behind's chunk freed", func() bool { return c.freed == 40*4096 })
	var st unix.Stat_t
	if err := unix.Fstat(int(c.spill.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if held := st.Blocks * 512; held > size-40*4096+64<<10 {
		t.Errorf("the spill holds %d bytes on its disk, want about the %d from behind's chunk on", held, size-40*4096)
	}
	write(behind, version[at:])
	for name, s := range map[string]*joined{"ahead": ahead, "behind": behind} {
		endedTogether(t, name, s, version)
		s.close()
		c.over()
	}
	// Both racks are over: everything hashed is freed.
	waitFor("all freed", func() bool { return c.freed == size })
}

// punchChunks is how many chunks (of 4096 bytes) punchingConvoy's version has.
const punchChunks = 64

// punchingConvoy is a convoy for the given number of racks, of a random
// version of punchChunks chunks of 4096 bytes (made from seed), freeing a
// chunk at a time, on a file system that can punch holes: else the test
// fails (or skips, outside CI).
func punchingConvoy(t *testing.T, racks int, seed uint64) (*convoy, []byte) {
	t.Helper()
	c, f := chunkSize, freeStep
	t.Cleanup(func() { chunkSize, freeStep = c, f })
	chunkSize, freeStep = 4096, 4096
	version := randomBytes(punchChunks*4096, seed)
	dir := t.TempDir()
	punchable(t, dir)
	conv, err := newConvoy(context.Background(), dir, int64(len(version)), racks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conv.stop)
	return conv, version
}

// punchable fails (or skips, outside CI) a test whose spill's file system
// in dir cannot punch holes.
func punchable(t *testing.T, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "punch-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 8192)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096); err != nil {
		testenv.Missing(t, "the file system of "+dir+" cannot punch holes: "+err.Error())
	}
}

// The rack that joins last, after every byte was lent and hashed, lets
// the convoy free what is behind it as it compares; so does a stream's
// move into a new chunk.
func TestConvoyFreesBehindTheLastRackToJoin(t *testing.T) {
	c, version := punchingConvoy(t, 2, 5)
	rnd := rand.New(rand.NewPCG(5, 5))
	if d, err := feed(c.join(), version, rnd, 5000); err != nil || d != sumOf(version) {
		t.Fatalf("first: %s, %v", d, err)
	}
	c.over()
	waitForConvoy(t, c, "every chunk hashed", func() bool { return c.hashed == punchChunks })
	last := c.join()
	if _, err := last.Write(version[:20*4096+7]); err != nil {
		t.Fatal(err)
	}
	waitForConvoy(t, c, "the bytes before the last rack's chunk freed", func() bool { return c.freed == 20*4096 })
	if _, err := last.Write(version[20*4096+7 : 41*4096]); err != nil {
		t.Fatal(err)
	}
	waitForConvoy(t, c, "freed as the last rack moved on", func() bool { return c.freed == 41*4096 })
	if _, err := last.Write(version[41*4096:]); err != nil {
		t.Fatal(err)
	}
	endedTogether(t, "the last rack", last, version)
	last.close()
	c.over()
}

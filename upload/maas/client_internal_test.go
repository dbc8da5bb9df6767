package maas

import (
	"testing"
	"time"
)

// The waits for another uploader's file are as long as that uploader may
// legitimately take: all the tries of a chunk before a file counts as
// stalled, the last chunk's hashing and the regions' sync before a file
// with all its bytes counts as stuck.
func TestWaitDefaults(t *testing.T) {
	c, err := New(Config{URL: "http://maas.example:5240/MAAS", APIKey: "a:b:c"})
	if err != nil {
		t.Fatal(err)
	}
	if want := 6*time.Minute + 31*time.Second; c.cfg.StallTimeout != want {
		t.Errorf("StallTimeout %v, want %v (6 tries of 60 s and 1+2+4+8+16 s of backoff)", c.cfg.StallTimeout, want)
	}
	if want := 25 * time.Minute; c.cfg.SettleTimeout != want {
		t.Errorf("SettleTimeout %v, want %v (the last chunk's 15 min and the sync's 10 min)", c.cfg.SettleTimeout, want)
	}
	// They follow the configuration they bound.
	c, err = New(Config{URL: "http://maas.example:5240/MAAS", APIKey: "a:b:c", Timeout: 10 * time.Second, Retries: 2,
		Backoff: func(int) time.Duration { return time.Second }, LastChunkTimeout: time.Minute, CompleteTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.StallTimeout != 32*time.Second || c.cfg.SettleTimeout != 2*time.Minute {
		t.Errorf("StallTimeout %v, SettleTimeout %v; want 32s, 2m0s", c.cfg.StallTimeout, c.cfg.SettleTimeout)
	}
}

// An incomplete file is waited for by what may still come: its middle
// chunks (StallTimeout), its last chunk, during which MAAS hashes the
// whole file and shows no progress (LastChunkTimeout), or MAAS's hashing
// and sync once all its bytes are there (SettleTimeout).
func TestWaitLimit(t *testing.T) {
	c, err := New(Config{URL: "http://maas.example:5240/MAAS", APIKey: "a:b:c"})
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 30
	last := 100 * (1 - float64(DefaultChunkSize)/size) // one chunk to go
	for _, tc := range []struct {
		progress float64
		want     time.Duration
	}{
		{0, c.cfg.StallTimeout},
		{50, c.cfg.StallTimeout},
		{last - 0.5, c.cfg.StallTimeout},
		{last, 15*time.Minute + time.Second},
		{99.9999, 15*time.Minute + time.Second},
		{100, c.cfg.SettleTimeout},
	} {
		if got := c.waitLimit(size, tc.progress); got != tc.want {
			t.Errorf("waitLimit(%d, %v) = %v, want %v", size, tc.progress, got, tc.want)
		}
	}
}

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

package store

import (
	"context"
	"errors"
	"testing"
)

// Under OneView a key's fetch runs once, until it succeeds, and each key
// (remote) has its own; without a view every read fetches.
func TestViewFetch(t *testing.T) {
	calls := 0
	fetch := func(tip string, err error) func() (string, error) {
		return func() (string, error) { calls++; return tip, err }
	}
	ctx := OneView(context.Background())
	if _, err := ViewFetch(ctx, "a", fetch("", errors.New("offline"))); err == nil {
		t.Fatal("the fetch's error was lost")
	}
	for range 2 {
		if tip, err := ViewFetch(OneView(ctx), "a", fetch("c1", nil)); tip != "c1" || err != nil {
			t.Fatalf("%q %v", tip, err)
		}
	}
	if tip, _ := ViewFetch(ctx, "b", fetch("c2", nil)); tip != "c2" {
		t.Errorf("another remote's read gave %q", tip)
	}
	if calls != 3 {
		t.Errorf("%d fetches under one view, want 3 (a failed, a, b)", calls)
	}
	calls = 0
	for range 2 {
		ViewFetch(context.Background(), "a", fetch("c1", nil))
	}
	if calls != 2 {
		t.Errorf("%d fetches without a view, want 2", calls)
	}
}

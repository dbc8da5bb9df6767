// Package backoff owns the waits between the attempts of imagectl's HTTP
// clients (upload/maas, upload/profile): the default schedule, 1 s
// doubling up to 30 s, and a wait that ends early with its context. When
// to retry is each client's own.
package backoff

import (
	"context"
	"time"
)

// Max is the longest wait Default gives.
const Max = 30 * time.Second

// Default is the wait before retry n (from 1): 1 s, 2 s, 4 s, … up to Max.
func Default(n int) time.Duration {
	if n > 5 {
		return Max
	}
	return min(time.Second<<max(n-1, 0), Max)
}

// Sleep waits d, or until ctx ends, returning its error then.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Package backoff owns the waits between the attempts of imagectl's HTTP
// clients (upload/maas, package profile): the default schedule, 1 s
// doubling up to 30 s, a wait that ends early with its context, and the
// bound on retrying a request that could not connect (Within,
// NoConnection), and the full-jitter wait of writers racing for one
// resource (Jitter: the git catalog's pushes). When to retry is each
// client's own.
package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
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

// Within reports whether a retry after wait would start within limit of
// start, the first try. A request that could not connect (NoConnection) is
// retried only while this holds, so that a server that is not there is
// reported in about the configured timeout, not after every backoff of the
// schedule.
func Within(start time.Time, limit, wait time.Duration) bool {
	return time.Since(start)+wait <= limit
}

// NoConnection reports whether err is a failure to connect: a refused
// connection, an unknown host, no route (a dial error).
func NoConnection(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Jitter is the wait before retry n (from 1) of writers that race for one
// resource: a random while in [0, min(base·2^(n-1), ceiling)), "full
// jitter", so that writers who lost together spread out instead of
// colliding again on the same schedule. A base or ceiling that is not
// positive waits nothing.
func Jitter(n int, base, ceiling time.Duration) time.Duration {
	if base <= 0 || ceiling <= 0 {
		return 0
	}
	d := ceiling
	if n < 1 {
		n = 1
	}
	if n <= 62 && base <= ceiling>>(n-1) {
		d = base << (n - 1)
	}
	return rand.N(d)
}

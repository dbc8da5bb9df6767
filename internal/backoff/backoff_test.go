package backoff

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestDefault(t *testing.T) {
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, Max, Max}
	for n, w := range want {
		if got := Default(n); got != w {
			t.Errorf("Default(%d) = %v, want %v", n, got, w)
		}
	}
	if Default(1000) != Max {
		t.Error("no cap on a large n")
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Errorf("a cancelled sleep: %v after %v", err, time.Since(start))
	}
}

func TestWithin(t *testing.T) {
	start := time.Now().Add(-3 * time.Second)
	if !Within(start, 5*time.Second, time.Second) {
		t.Error("a retry 4 s after the first try is not within 5 s")
	}
	if Within(start, 5*time.Second, 4*time.Second) {
		t.Error("a retry 7 s after the first try is within 5 s")
	}
}

func TestNoConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = http.Get("http://" + addr + "/")
	if err == nil || !NoConnection(fmt.Errorf("listing: %w", err)) {
		t.Errorf("a refused connection (%v) is not NoConnection", err)
	}
	if NoConnection(context.DeadlineExceeded) || NoConnection(errors.New("503")) {
		t.Error("a timeout or an answer is NoConnection")
	}
}

func TestJitter(t *testing.T) {
	const base, ceiling = 100 * time.Millisecond, time.Second
	for _, tc := range []struct {
		n     int
		bound time.Duration
	}{{0, base}, {1, base}, {2, 2 * base}, {4, 8 * base}, {5, ceiling}, {64, ceiling}, {1 << 30, ceiling}} {
		var top time.Duration
		for range 2000 {
			d := Jitter(tc.n, base, ceiling)
			if d < 0 || d >= tc.bound {
				t.Fatalf("Jitter(%d) = %v, outside [0, %v)", tc.n, d, tc.bound)
			}
			top = max(top, d)
		}
		// Full jitter spreads over the whole range, not a corner of it.
		if top < tc.bound/2 {
			t.Errorf("Jitter(%d): the longest of 2000 waits is %v, under half of %v", tc.n, top, tc.bound)
		}
	}
	if d := Jitter(3, 0, time.Second); d != 0 {
		t.Errorf("no base: %v", d)
	}
}

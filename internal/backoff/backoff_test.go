package backoff

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
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
	addr := testenv.RefusedAddr(t)
	_, err := http.Get("http://" + addr + "/")
	if err == nil || !NoConnection(fmt.Errorf("listing: %w", err)) {
		t.Errorf("a refused connection (%v) is not NoConnection", err)
	}
	if NoConnection(context.DeadlineExceeded) || NoConnection(errors.New("503")) {
		t.Error("a timeout or an answer is NoConnection")
	}
}

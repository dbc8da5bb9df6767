package backoff

import (
	"context"
	"errors"
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

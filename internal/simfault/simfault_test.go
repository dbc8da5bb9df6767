package simfault

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type fault struct {
	on, kind     string
	after, times int
}

func newFaults() *Faults[string, fault] {
	return New(func(f fault) Match[string] { return Match[string]{On: f.on, After: f.after, Times: f.times} })
}

// Faults hit requests of their kind in order, after letting After through,
// Times of them (0: one, -1: all); every request is counted.
func TestTake(t *testing.T) {
	s := newFaults()
	s.Inject(fault{on: "get", kind: "a", after: 1}, fault{on: "get", kind: "b", times: 2}, fault{on: "put", kind: "c", times: -1})
	var got []string
	for _, op := range []string{"get", "get", "get", "get", "get", "put", "put", "list"} {
		f, hit := s.Take(op)
		if !hit {
			f.kind = "-"
		}
		got = append(got, f.kind)
	}
	if want := "b a b - - c c -"; strings.Join(got, " ") != want {
		t.Errorf("hits %q, want %q", strings.Join(got, " "), want)
	}
	if s.Count("get") != 5 || s.Count("put") != 2 || s.Count("list") != 1 || s.Count("delete") != 0 {
		t.Errorf("counts get %d put %d list %d", s.Count("get"), s.Count("put"), s.Count("list"))
	}
	s.Clear()
	if _, hit := s.Take("put"); hit {
		t.Error("a cleared fault hit")
	}
}

// Hold answers nothing and drops the connection when the server closes,
// the client gives up or the limit passes. The client gives up, and the
// server closes, only once the request is held.
func TestHold(t *testing.T) {
	closing := make(chan struct{})
	held, released := make(chan struct{}, 1), make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := time.Minute
		if r.URL.Path == "/short" {
			limit = 10 * time.Millisecond
		} else {
			held <- struct{}{}
			defer func() { released <- struct{}{} }()
		}
		Hold(r, closing, limit)
	}))
	defer srv.Close()
	if _, err := http.Get(srv.URL + "/short"); err == nil {
		t.Error("the limit passed and an answer came")
	}
	wait := func(c <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal(what)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/", nil)
		_, err := http.DefaultClient.Do(req)
		done <- err
	}()
	wait(held, "the request was not held")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the client gave up: %v", err)
	}
	wait(released, "the client gave up and the hold went on")

	go func() { _, err := http.Get(srv.URL + "/"); done <- err }()
	wait(held, "the request was not held")
	close(closing)
	select {
	case err := <-done:
		if err == nil {
			t.Error("closing: an answer came")
		}
	case <-time.After(10 * time.Second):
		t.Error("closing did not release the request")
	}
	wait(released, "closing did not end the hold")
}

package testenv

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "FALSE": false, "true": true, "1": true, "yes": true} {
		t.Setenv("CI", v)
		if got := CI(); got != want {
			t.Errorf("CI=%q: got %v, want %v", v, got, want)
		}
	}
}

// Missing skips outside CI and fails under CI: run it in a subtest whose
// outcome the parent reads.
func TestMissing(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		var skipped, failed bool
		done := make(chan struct{})
		// A goroutine, as Skip and Fatal end it with runtime.Goexit.
		ft := &fakeT{}
		go func() {
			defer close(done)
			Missing(ft, "the widget is not installed")
		}()
		<-done
		skipped, failed = ft.skipped, ft.failed
		if ci == "" && (!skipped || failed) || ci == "true" && (skipped || !failed) {
			t.Errorf("CI=%q: skipped %v, failed %v", ci, skipped, failed)
		}
		if ft.msg == "" {
			t.Errorf("CI=%q: no reason given", ci)
		}
	}
}

type fakeT struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Skip(args ...any) {
	f.skipped, f.msg = true, args[0].(string)
	runtime.Goexit()
}
func (f *fakeT) Fatal(args ...any) {
	f.failed, f.msg = true, args[0].(string)
	runtime.Goexit()
}

// Errorf records a failure and goes on, as testing.T's does.
func (f *fakeT) Errorf(format string, args ...any) {
	f.failed, f.msg = true, f.msg+fmt.Sprintf(format, args...)+"\n"
}

func TestHolds(t *testing.T) {
	ft := &fakeT{}
	Holds(ft, "the plan", "image demo 1.0\nbundle site\n", "image demo", "bundle site")
	if ft.failed {
		t.Errorf("an output holding both failed: %s", ft.msg)
	}
	Holds(ft, "the plan", "image demo 1.0\n", "image demo", "bundle site", "MAAS target")
	if !ft.failed || !strings.Contains(ft.msg, `the plan lacks "bundle site"`) || !strings.Contains(ft.msg, `lacks "MAAS target"`) ||
		strings.Contains(ft.msg, `lacks "image demo"`) {
		t.Errorf("want each missing string named, and only those: %s", ft.msg)
	}
}

func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Errorf("got %d bytes, want 800", len(got))
	}
}

func TestRefusedAddr(t *testing.T) {
	addr := RefusedAddr(t)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s accepted a connection", addr)
	}
}

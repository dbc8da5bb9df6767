package guestfs

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeSession is a launch's session: whether it was closed, and what
// closing it returns.
type fakeSession struct {
	n        int
	closed   bool
	closeErr error
}

func (s *fakeSession) Close() error { s.closed = true; return s.closeErr }

// TestUntilFirstDrive runs the relaunch rule on launches whose kernel
// named the image's disk as listed: which launch is kept, which are closed,
// what is said.
func TestUntilFirstDrive(t *testing.T) {
	errLaunch := errors.New("launch failed")
	errClose := errors.New("shutdown failed")
	for _, c := range []struct {
		name     string
		named    []string // one a launch; "!" fails it
		closeErr error
		cancel   bool // the context ends with the first launch
		keep     int  // the launch kept (from 1), 0 when none
		launches int
		err      error
		said     []string // what each log line says, in order
	}{
		{name: "first launch right", named: []string{"/dev/sda"}, keep: 1, launches: 1},
		{name: "two swapped, then right", named: []string{"/dev/sdb", "/dev/sdb", "/dev/sda"}, keep: 3, launches: 3,
			said: []string{"named the image's disk /dev/sdb, not /dev/sda", "named the image's disk /dev/sdb, not /dev/sda"}},
		{name: "swapped every time", named: []string{"/dev/sdb", "/dev/sdb", "/dev/sdb", "/dev/sdb", "/dev/sda"}, keep: 4, launches: 4,
			said: []string{"launching it again", "launching it again", "launching it again", "in each of 4 launches: going on"}},
		{name: "cannot tell", named: []string{""}, keep: 1, launches: 1, said: []string{"could not tell"}},
		{name: "a relaunch fails", named: []string{"/dev/sdb", "!"}, launches: 2, err: errLaunch, said: []string{"launching it again"}},
		{name: "closing fails", named: []string{"/dev/sdb", "/dev/sda"}, closeErr: errClose, launches: 1, err: errClose,
			said: []string{"launching it again"}},
		{name: "cancelled", named: []string{"/dev/sdb", "/dev/sda"}, cancel: true, launches: 1, err: context.Canceled,
			said: []string{"launching it again"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var opened []*fakeSession
			var said []string
			s, launches, err := untilFirstDrive(ctx, "disk.qcow2", func(l string) { said = append(said, l) }, func() (*fakeSession, string, error) {
				i := len(opened)
				if i == len(c.named) {
					t.Fatalf("launch %d: only %d expected", i+1, len(c.named))
				}
				if c.named[i] == "!" {
					return nil, "", errLaunch
				}
				fs := &fakeSession{n: i + 1, closeErr: c.closeErr}
				opened = append(opened, fs)
				if c.cancel {
					cancel()
				}
				return fs, c.named[i], nil
			})
			if !errors.Is(err, c.err) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			if err != nil && c.err == errClose && !strings.Contains(err.Error(), "disk.qcow2") {
				t.Errorf("the error %q does not name the disk", err)
			}
			if launches != c.launches {
				t.Errorf("%d launches, want %d", launches, c.launches)
			}
			switch {
			case c.keep == 0 && s != nil:
				t.Errorf("kept launch %d, want none", s.n)
			case c.keep != 0 && (s == nil || s.n != c.keep):
				t.Errorf("kept %+v, want launch %d", s, c.keep)
			}
			for _, o := range opened {
				if want := o.n != c.keep; o.closed != want {
					t.Errorf("launch %d closed: %v, want %v", o.n, o.closed, want)
				}
			}
			if len(said) != len(c.said) {
				t.Fatalf("said %q, want %d lines", said, len(c.said))
			}
			for i, l := range said {
				if !strings.Contains(l, c.said[i]) {
					t.Errorf("line %d %q does not say %q", i+1, l, c.said[i])
				}
			}
		})
	}
}

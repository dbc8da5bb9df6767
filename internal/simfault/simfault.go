// Package simfault owns the fault injection of imagectl's test servers
// (upload/maassim, the simulated MAAS, and profile/profilesim, the
// fake admin API): faults queued per kind of request, each letting some
// requests through and then hitting a number of them, a count of the
// requests of each kind, and the hold of a request whose answer never
// comes. What a fault does to a request is each server's own.
package simfault

import (
	"net/http"
	"sync"
	"time"
)

// Match says which requests a fault hits: requests of kind On, after
// letting After of them through, Times of them (0 means 1, -1 all).
type Match[Op comparable] struct {
	On    Op
	After int
	Times int
}

// Faults are the faults injected into a server, of a server's own fault
// type F, and the count of its requests by kind. The zero value is not
// usable: make one with New.
type Faults[Op comparable, F any] struct {
	match func(F) Match[Op]

	mu     sync.Mutex
	queued []*state[Op, F]
	counts map[Op]int
}

type state[Op comparable, F any] struct {
	fault     F
	m         Match[Op]
	seen, hit int
}

// New returns an empty set of faults; match says which requests a fault
// hits.
func New[Op comparable, F any](match func(F) Match[Op]) *Faults[Op, F] {
	return &Faults[Op, F]{match: match, counts: map[Op]int{}}
}

// Inject adds faults; each hits requests of its kind in order.
func (s *Faults[Op, F]) Inject(faults ...F) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range faults {
		m := s.match(f)
		if m.Times == 0 {
			m.Times = 1
		}
		s.queued = append(s.queued, &state[Op, F]{fault: f, m: m})
	}
}

// Clear removes every injected fault.
func (s *Faults[Op, F]) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued = nil
}

// Count is how many requests of a kind Take was given.
func (s *Faults[Op, F]) Count(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// Take counts a request of kind op and returns the fault that hits it,
// false when none does.
func (s *Faults[Op, F]) Take(op Op) (F, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[op]++
	for _, f := range s.queued {
		if f.m.On != op {
			continue
		}
		f.seen++
		if f.seen <= f.m.After || (f.m.Times >= 0 && f.hit >= f.m.Times) {
			continue
		}
		f.hit++
		return f.fault, true
	}
	var none F
	return none, false
}

// Hold sends no answer to r: it waits until the client gives up, closing
// is closed (the server stops) or limit passes, then drops the connection.
// It does not return.
func Hold(r *http.Request, closing <-chan struct{}, limit time.Duration) {
	select {
	case <-r.Context().Done():
	case <-closing:
	case <-time.After(limit):
	}
	panic(http.ErrAbortHandler)
}

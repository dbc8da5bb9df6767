// Package event owns the progress vocabulary of imagectl's long
// operations (build, smoke test, upload): Event, the one shape they all
// report in, which the CLI draws on a terminal or prints as JSON lines, and
// Reporter, which stamps events and hands them on. The operations report;
// they never print.
package event

import "time"

// Event is one thing an operation reports: a phase or step starting or
// ending, a log line, progress through a phase.
type Event struct {
	Time time.Time `json:"time"`
	// Type is TypePhase, TypeStep, TypeLog, TypeProgress or TypeTimings.
	Type string `json:"type"`
	// Status is StatusStart, StatusOK or StatusFailed for phases and steps,
	// StatusCached for a build's layer restored from the layer cache.
	Status string `json:"status,omitempty"`
	Phase  string `json:"phase,omitempty"`
	// Layer and Kind name a build step's layer and step kind.
	Layer   string  `json:"layer,omitempty"`
	Kind    string  `json:"kind,omitempty"`
	Summary string  `json:"summary,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Message string  `json:"message,omitempty"`
	// Done and Total are a progress event's bytes (or units) so far and
	// in all.
	Done  int64 `json:"done,omitempty"`
	Total int64 `json:"total,omitempty"`
	// Timings are a timings event's figures by name (seconds, and bytes
	// where the name says so): one layer's when Layer is set, else the
	// whole operation's. Seconds is then the layer's, or the whole's, time.
	Timings map[string]float64 `json:"timings,omitempty"`
}

// Event types.
const (
	TypePhase    = "phase"
	TypeStep     = "step"
	TypeLog      = "log"
	TypeProgress = "progress"
	// TypeTimings says where an operation's time went, once per part
	// (a build's layer) and once in all, when it ends.
	TypeTimings = "timings"
)

// Statuses of phases and steps.
const (
	StatusStart  = "start"
	StatusOK     = "ok"
	StatusFailed = "failed"
	StatusCached = "cached"
)

// Reporter hands events to the function it is; a nil Reporter discards
// them. Operations take a func(Event) in their options and convert it.
type Reporter func(Event)

// Timings reports where the time of layer (or, with layer "", of the whole
// operation) went.
func (r Reporter) Timings(layer string, seconds float64, figures map[string]float64) {
	r.Emit(Event{Type: TypeTimings, Layer: layer, Seconds: seconds, Timings: figures})
}

// Emit stamps e with the time when it has none and hands it on.
func (r Reporter) Emit(e Event) {
	if r == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	r(e)
}

// Log reports a log line.
func (r Reporter) Log(msg string) { r.Emit(Event{Type: TypeLog, Message: msg}) }

// Progress reports done of total through a phase.
func (r Reporter) Progress(phase string, done, total int64) {
	r.Emit(Event{Type: TypeProgress, Phase: phase, Done: done, Total: total})
}

// Phase reports a phase's start and returns the function that reports its
// end, with its duration and the error it ended with (nil: ok).
func (r Reporter) Phase(name, summary string) func(error) {
	start := time.Now()
	r.Emit(Event{Type: TypePhase, Status: StatusStart, Phase: name, Summary: summary})
	return func(err error) {
		e := Event{Type: TypePhase, Status: StatusOK, Phase: name, Summary: summary, Seconds: time.Since(start).Seconds()}
		if err != nil {
			e.Status, e.Message = StatusFailed, err.Error()
		}
		r.Emit(e)
	}
}

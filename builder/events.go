package builder

import "time"

// Event is one thing a build reports: a phase or step starting or ending,
// a log line, download progress. The CLI draws them on a terminal or prints
// them as JSON lines; the builder never prints.
type Event struct {
	Time time.Time `json:"time"`
	// Type is "phase", "step", "log" or "progress".
	Type string `json:"type"`
	// Status is "start", "ok" or "failed" for phases and steps.
	Status  string  `json:"status,omitempty"`
	Phase   string  `json:"phase,omitempty"`
	Layer   string  `json:"layer,omitempty"`
	Kind    string  `json:"kind,omitempty"`
	Summary string  `json:"summary,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Message string  `json:"message,omitempty"`
	Done    int64   `json:"done,omitempty"`
	Total   int64   `json:"total,omitempty"`
}

// Phases of a build, in order.
const (
	PhaseVerifyBase = "verify-base"
	PhasePrepare    = "prepare-disk"
	PhaseRestore    = "restore-cache"
	PhaseLaunch     = "launch"
	PhaseLayers     = "layers"
	PhaseSnapshot   = "snapshot"
	PhasePack       = "pack"
	PhaseCheck      = "check"
	PhaseManifest   = "manifest"
)

type reporter struct {
	fn func(Event)
}

func (r reporter) emit(e Event) {
	if r.fn == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	r.fn(e)
}

func (r reporter) log(msg string) { r.emit(Event{Type: "log", Message: msg}) }

// phase reports a phase's start and returns the function that reports its
// end with the error it ended with.
func (r reporter) phase(name, summary string) func(error) {
	start := time.Now()
	r.emit(Event{Type: "phase", Status: "start", Phase: name, Summary: summary})
	return func(err error) {
		e := Event{Type: "phase", Status: "ok", Phase: name, Summary: summary, Seconds: time.Since(start).Seconds()}
		if err != nil {
			e.Status, e.Message = "failed", err.Error()
		}
		r.emit(e)
	}
}

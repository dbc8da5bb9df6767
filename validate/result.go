package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"
)

// ResultSchema names the JSON document the validation script writes with
// --json (and keeps under StateDir on a live run).
const ResultSchema = "imagectl.validate.result/v1"

// StateDir is where a live run of the validation script keeps its last
// result on the host: StateDir/result.json (and one file per profile and
// stage, result-PROFILE-STAGE.json).
const StateDir = "/var/lib/imagectl/validate"

// MaxResult bounds a result document: a few hundred checks with their
// details and remediations fit in well under a megabyte.
const MaxResult = 4 << 20

// Statuses of a check.
const (
	StatusPass = "PASS"
	StatusFail = "FAIL"
	StatusWarn = "WARN"
)

// Result is one run of the validation script on one host (or an unpacked
// root, Live false): which image, where, at which profile and stage, every
// check, and the first-boot timeline the host could tell.
type Result struct {
	Schema  string `json:"schema"`
	Image   string `json:"image"`
	Version string `json:"version"`
	Profile string `json:"profile"`
	Stage   string `json:"stage"`
	// Host is the host's name (uname -n: letters, digits, '.', '_', '-'),
	// MachineID its /etc/machine-id (32 hex digits), "" when it has none.
	Host      string `json:"host"`
	MachineID string `json:"machine_id,omitempty"`
	// Live is false for a run over an unpacked root (--root).
	Live     bool      `json:"live"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// ScriptSHA256 is the sha256 of the script that ran: the version's
	// validation script, byte for byte.
	ScriptSHA256 string  `json:"script_sha256"`
	Checks       []Check `json:"checks"`
	Counts       Counts  `json:"counts"`
	// Timeline is the host's first boot in smoke's milestone names (see
	// Milestones), as far as the host can tell.
	Timeline []Milestone `json:"timeline,omitempty"`
}

// Check is one check's outcome: one IMAGECTL_VALIDATE line.
type Check struct {
	Status      string `json:"status"`
	Name        string `json:"check"`
	Detail      string `json:"detail,omitempty"`
	Remediation string `json:"remediation,omitempty"`
}

// Counts are the summary line's numbers.
type Counts struct {
	Checks   int `json:"checks"`
	Failures int `json:"failures"`
	Warnings int `json:"warnings"`
}

// Milestone is one point of the host's first boot: seconds since the
// kernel started, and where the figure came from (systemd-analyze,
// cloud-init analyze, the site bootstrap's markers).
type Milestone struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Source  string  `json:"source"`
}

// Passed is whether the run found no failure.
func (r *Result) Passed() bool { return r.Counts.Failures == 0 && r.failed() == 0 }

func (r *Result) failed() int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == StatusFail {
			n++
		}
	}
	return n
}

// Failing are the checks that failed, in the order they ran.
func (r *Result) Failing() []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Status == StatusFail {
			out = append(out, c)
		}
	}
	return out
}

var (
	reSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// reHost is a host name as uname -n gives it: letters, digits, '.',
	// '_' and '-', at most 253 bytes (a DNS name's bound).
	reHost = regexp.MustCompile(`^[A-Za-z0-9._-]{1,253}$`)
	// reMachineID is /etc/machine-id: 32 hex digits.
	reMachineID = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)
)

// ParseResult reads a result document strictly: one JSON value of this
// schema, no unknown field, at most MaxResult bytes, and counts that agree
// with its checks. It says what is wrong, not where in the bytes.
func ParseResult(b []byte) (*Result, error) {
	if len(b) > MaxResult {
		return nil, fmt.Errorf("a validation result is at most %d bytes, this one is %d", MaxResult, len(b))
	}
	var r Result
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("not a validation result: %w", err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return nil, errors.New("not a validation result: more than one JSON value")
	}
	if err := r.Check(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Check says what is missing or inconsistent in a result, nil when it is
// whole.
func (r *Result) Check() error {
	var errs []error
	if r.Schema != ResultSchema {
		errs = append(errs, fmt.Errorf("schema %q, this imagectl reads %q", r.Schema, ResultSchema))
	}
	for _, f := range []struct{ name, v string }{
		{"image", r.Image}, {"version", r.Version}, {"profile", r.Profile}, {"stage", r.Stage}, {"host", r.Host},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("no %s", f.name))
		}
	}
	if r.Host != "" && !reHost.MatchString(r.Host) {
		errs = append(errs, fmt.Errorf("host %q is not a host name (at most 253 letters, digits, '.', '_' or '-')", r.Host))
	}
	if r.MachineID != "" && !reMachineID.MatchString(r.MachineID) {
		errs = append(errs, fmt.Errorf("machine_id %q is not a machine id (32 hex digits)", r.MachineID))
	}
	if !reSHA256.MatchString(r.ScriptSHA256) {
		errs = append(errs, fmt.Errorf("script_sha256 %q is not a sha256", r.ScriptSHA256))
	}
	if r.Started.IsZero() || r.Finished.Before(r.Started) {
		errs = append(errs, fmt.Errorf("started %s and finished %s are not a run", r.Started.Format(time.RFC3339), r.Finished.Format(time.RFC3339)))
	}
	var c Counts
	for i, ch := range r.Checks {
		c.Checks++
		switch ch.Status {
		case StatusFail:
			c.Failures++
		case StatusWarn:
			c.Warnings++
		case StatusPass:
		default:
			errs = append(errs, fmt.Errorf("check %d (%q) has status %q, not PASS, FAIL or WARN", i+1, ch.Name, ch.Status))
		}
		if ch.Name == "" {
			errs = append(errs, fmt.Errorf("check %d has no name", i+1))
		}
	}
	if c != r.Counts {
		errs = append(errs, fmt.Errorf("counts %+v do not match its checks %+v", r.Counts, c))
	}
	if len(errs) > 0 {
		return fmt.Errorf("not a whole validation result: %w", errors.Join(errs...))
	}
	return nil
}

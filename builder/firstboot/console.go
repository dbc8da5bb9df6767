package firstboot

import (
	"fmt"
	"strconv"
	"strings"
)

// Console is what a first-boot script's lines said, read from a console
// or a log that carries them among other output (Line takes every line).
// A run the script never finished has no Status: the result line did not
// come.
type Console struct {
	// Status is the result line's: "ok" or "failed"; "" before it came.
	Status string `json:"status,omitempty"`
	Steps  int    `json:"steps,omitempty"`
	// Ran, AlreadyDone and NotAtFirstBoot count the steps by what became
	// of them.
	Ran            int `json:"ran,omitempty"`
	AlreadyDone    int `json:"already_done,omitempty"`
	NotAtFirstBoot int `json:"not_at_first_boot,omitempty"`
	// FailedStep is the step that failed (status failed).
	FailedStep int `json:"failed_step,omitempty"`
	// DownloadBytes is what apt downloaded: ArchiveBytes (the packages'
	// archives, as apt's --print-uris sizes them) plus IndexBytes (what
	// apt-get update says it fetched).
	DownloadBytes int64 `json:"download_bytes"`
	ArchiveBytes  int64 `json:"archive_bytes"`
	IndexBytes    int64 `json:"index_bytes"`
	// MissingOptional are the optional packages the archive had no
	// candidate for.
	MissingOptional []string `json:"missing_optional,omitempty"`
	// RebootRequired: a step's change takes effect at the next boot only
	// (kernel args, a modprobe option, GRUB's defaults).
	RebootRequired bool `json:"reboot_required"`
	// Seconds is the script's own time, by the guest's clock.
	Seconds float64 `json:"seconds,omitempty"`
	// Times are the script's milestones (MilestoneStart, MilestoneDone)
	// in seconds since the kernel started.
	Times map[string]float64 `json:"times,omitempty"`
	// Errors are the last error lines of a failing step.
	Errors []string `json:"errors,omitempty"`
	// NotHere are the steps that did not run at first boot, and Partly
	// those that ran in part, each as the script logged it: "step N/M:
	// SUMMARY (why: WHY)" and "step N/M: WHY" (what does not run). A
	// rerun's line replaces the first run's for the same step.
	NotHere []string `json:"not_here,omitempty"`
	Partly  []string `json:"partly,omitempty"`
}

// maxErrors is how many error lines Console keeps; maxSteps how many
// NotHere and Partly lines (a script has a few dozen steps).
const (
	maxErrors = 5
	maxSteps  = 256
)

// Line reads one line of output: it returns false when the line is not
// the script's (its Prefix may follow other text, a console's timestamp or
// cloud-init's). The last result line wins: a rerun's replaces the first.
func (c *Console) Line(line string) bool {
	i := strings.Index(line, Prefix+" ")
	if i < 0 {
		return false
	}
	rest := strings.TrimRight(line[i+len(Prefix)+1:], "\r\n ")
	switch {
	case strings.HasPrefix(rest, "time "):
		name, v, ok := strings.Cut(strings.TrimPrefix(rest, "time "), "=")
		if f, err := strconv.ParseFloat(v, 64); ok && err == nil {
			if c.Times == nil {
				c.Times = map[string]float64{}
			}
			c.Times[name] = f
		}
	case strings.HasPrefix(rest, "result "):
		c.result(strings.TrimPrefix(rest, "result "))
	case strings.HasPrefix(rest, "step=") && strings.Contains(rest, " error "):
		_, msg, _ := strings.Cut(rest, " error ")
		c.Errors = append(c.Errors, msg)
		if len(c.Errors) > maxErrors {
			c.Errors = c.Errors[len(c.Errors)-maxErrors:]
		}
	case strings.HasPrefix(rest, "step="):
		step, fields, _ := strings.Cut(strings.TrimPrefix(rest, "step="), " ")
		if _, what, ok := strings.Cut(fields, " not-at-first-boot "); ok {
			c.NotHere = stepNote(c.NotHere, step, what)
		} else if what, ok := strings.CutPrefix(fields, "partly: "); ok {
			c.Partly = stepNote(c.Partly, step, what)
		}
	}
	return true
}

// stepNote adds "step N/M: WHAT" to notes, in place of an earlier note of
// the same step (a rerun logs it again).
func stepNote(notes []string, step, what string) []string {
	prefix := "step " + step + ": "
	for i, n := range notes {
		if strings.HasPrefix(n, prefix) {
			notes[i] = prefix + what
			return notes
		}
	}
	if len(notes) >= maxSteps {
		return notes
	}
	return append(notes, prefix+what)
}

// result reads the result line's key=value fields; keys it does not know
// are skipped, so older and newer scripts both read.
func (c *Console) result(s string) {
	kv := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		kv[k] = v
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(kv[k]); return n }
	bytes := func(k string) int64 { n, _ := strconv.ParseInt(kv[k], 10, 64); return n }
	c.Status = kv["status"]
	c.Steps, c.Ran, c.AlreadyDone, c.NotAtFirstBoot = atoi("steps"), atoi("ran"), atoi("already_done"), atoi("not_at_first_boot")
	c.FailedStep = atoi("failed_step")
	c.DownloadBytes, c.ArchiveBytes, c.IndexBytes = bytes("download_bytes"), bytes("archive_bytes"), bytes("index_bytes")
	c.MissingOptional = nil
	if m := kv["missing_optional"]; m != "" && m != "-" {
		c.MissingOptional = strings.Split(m, ",")
	}
	c.RebootRequired = kv["reboot_required"] == "yes"
	c.Seconds, _ = strconv.ParseFloat(kv["seconds"], 64)
}

// Failure explains why the script did not succeed ("" when it did): it
// failed at a step (with that step's errors), or it never wrote its result
// line (it did not run, or did not finish).
func (c *Console) Failure() string {
	switch c.Status {
	case "ok":
		return ""
	case "":
		if _, started := c.Times[MilestoneStart]; started {
			return "the first-boot script started but never wrote its result line (it was killed, or is still running)"
		}
		return "the first-boot script never ran (no " + Prefix + " line on the console: cloud-init did not run the user-data's runcmd)"
	}
	s := fmt.Sprintf("the first-boot script failed at step %d of %d", c.FailedStep, c.Steps)
	if len(c.Errors) > 0 {
		s += ": " + strings.Join(c.Errors, "; ")
	}
	return s
}

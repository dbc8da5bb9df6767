package smoke

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpuaas/imagectl/validate"
)

// Boot stages as the console shows them.
const (
	stageFirmware  = "firmware"
	stageKernel    = "kernel"
	stageMultiUser = "multi-user"
	stageSettled   = "settled"
	stageDone      = "done"
)

// watcher reads the serial console line by line and follows the boot:
// firmware and GRUB, the kernel, multi-user.target, the settled system
// state, the validation lines, the end. It fails fast on what will never
// recover (a kernel panic, emergency mode).
type watcher struct {
	res   *Result
	stage string
	// on is told when the stage changes.
	on func(stage string)
	// grubErrors are "error:" lines seen before the kernel started: GRUB's
	// way of saying a file is missing.
	grubErrors []string
	tail       []string
}

var (
	ansiRE    = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]`)
	kernelRE  = regexp.MustCompile(`Linux version \d`)
	panicRE   = regexp.MustCompile(`Kernel panic - not syncing.*`)
	emergency = []string{"You are in emergency mode", "Give root password for maintenance", "You are in rescue mode",
		"Cannot open access to console, the root account is locked"}
	initramfsShell = "(initramfs)"
)

func newWatcher(res *Result, on func(string)) *watcher {
	return &watcher{res: res, stage: stageFirmware, on: on}
}

func (w *watcher) setStage(s string) {
	if w.stage == s {
		return
	}
	w.stage = s
	if w.on != nil {
		w.on(s)
	}
}

// cleanLine drops terminal escapes and carriage returns from a console line.
func cleanLine(s string) string {
	s = strings.TrimRight(ansiRE.ReplaceAllString(s, ""), "\r\n ")
	if i := strings.LastIndexByte(s, '\r'); i >= 0 {
		s = s[i+1:] // a line redrawn in place: keep what was drawn last
	}
	return s
}

// feed takes one console line. It returns done when the smoke script has
// finished, or an error when the boot cannot succeed any more.
func (w *watcher) feed(raw string) (done bool, err error) {
	line := cleanLine(raw)
	if line == "" {
		return false, nil
	}
	w.tail = append(w.tail, line)
	if len(w.tail) > 15 {
		w.tail = w.tail[1:]
	}
	if i := strings.Index(line, validate.Prefix+" "); i >= 0 {
		w.validation(line[i+len(validate.Prefix)+1:])
		return false, nil
	}
	if i := strings.Index(line, markerPrefix); i >= 0 {
		return w.marker(line[i+len(markerPrefix):])
	}
	switch {
	case w.stage == stageFirmware && kernelRE.MatchString(line):
		w.setStage(stageKernel)
	case w.stage == stageFirmware && strings.HasPrefix(strings.TrimSpace(line), "error: "):
		w.grubErrors = append(w.grubErrors, strings.TrimSpace(line))
	case panicRE.MatchString(line):
		return false, fmt.Errorf("the kernel panicked: %s", panicRE.FindString(line))
	case w.stage == stageKernel && strings.Contains(line, initramfsShell):
		return false, fmt.Errorf("the boot stopped in the initramfs shell (the root filesystem was not mounted): %s", w.context())
	}
	if w.stage == stageKernel {
		for _, e := range emergency {
			if strings.Contains(line, e) {
				return false, fmt.Errorf("the boot fell into emergency mode and never reached multi-user.target: %s", w.context())
			}
		}
	}
	return false, nil
}

func (w *watcher) marker(m string) (bool, error) {
	key, val, _ := strings.Cut(m, "=")
	switch key {
	case "multi-user":
		w.setStage(stageMultiUser)
	case "state":
		w.res.SystemState = val
		w.setStage(stageSettled)
	case "failed-unit":
		w.res.FailedUnits = append(w.res.FailedUnits, val)
	case "cmdline":
		w.res.KernelCmdline = val
	case "validate-exit":
		if n, err := strconv.Atoi(val); err == nil {
			w.res.ValidateExit = &n
		}
	case "no-validation-script":
		return false, fmt.Errorf("the booted image has no validation script at %s", val)
	case "done":
		w.setStage(stageDone)
		return true, nil
	}
	return false, nil
}

// validation records one of the script's lines:
// status=PASS check=NAME detail=TEXT, or the summary.
func (w *watcher) validation(s string) {
	if strings.HasPrefix(s, "summary ") {
		return
	}
	var l Line
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		if dec, err := url.PathUnescape(v); err == nil {
			v = dec
		}
		switch k {
		case "status":
			l.Status = v
		case "check":
			l.Check = v
		case "detail":
			l.Detail = v
		}
	}
	if l.Status == "" || l.Check == "" {
		return
	}
	switch l.Status {
	case "FAIL":
		w.res.Failures++
	case "WARN":
		w.res.Warnings++
	}
	w.res.Lines = append(w.res.Lines, l)
}

// context is the last console lines, for an error that needs them.
func (w *watcher) context() string {
	return "last console lines:\n  " + strings.Join(w.tail, "\n  ")
}

// stalled explains a boot that ended (timed out, or the VM stopped) before
// the smoke script was done.
func (w *watcher) stalled() string {
	switch w.stage {
	case stageFirmware:
		s := "the kernel never started (UEFI firmware or GRUB)"
		if len(w.grubErrors) > 0 {
			s += "; GRUB said: " + strings.Join(w.grubErrors, "; ")
		}
		return s
	case stageKernel:
		return "the kernel started but the system never reached multi-user.target"
	case stageMultiUser:
		return "multi-user.target was reached but the boot never settled (a start job kept running)"
	default:
		return fmt.Sprintf("the validation did not finish (%d lines so far)", len(w.res.Lines))
	}
}

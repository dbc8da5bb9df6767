package smoke

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

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
// state, the bootstrap's outcome, the validation lines, the end; and it
// keeps the times the boot's timeline is made of. It fails fast on what
// will never recover (a kernel panic, emergency mode).
type watcher struct {
	res   *Result
	stage string
	// on is told when the stage changes.
	on func(stage string)
	// grubErrors are "error:" lines seen before the kernel started: GRUB's
	// way of saying a file is missing.
	grubErrors []string
	tail       []string
	// receivedBefore is what the guest received in the boots before an
	// announced reboot (the counters start again at 0).
	receivedBefore int64
	// bootID is the boot the timed lines come from (the kernel's boot id,
	// which the smoke's scripts print with every clock, time and systemd
	// line); earlierBoots are those it replaced, and rebootAnnounced says
	// that the smoke script announced its reboot and the next boot's id
	// has not come yet: the one change of boot id allowed.
	bootID          string
	earlierBoots    []string
	rebootAnnounced bool
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

// feed takes one console line, which arrived at time at since QEMU
// started. It returns done when the smoke script has finished, or an error
// when the boot cannot succeed any more.
func (w *watcher) feed(raw string, at time.Duration) (done bool, err error) {
	line := cleanLine(raw)
	if line == "" {
		return false, nil
	}
	w.tail = keepLast(w.tail, line, 15)
	if w.stage == stageDone {
		// A VM kept up: what it prints now is no part of the smoke run.
		if panicRE.MatchString(line) {
			return false, fmt.Errorf("the kernel panicked: %s", panicRE.FindString(line))
		}
		return false, nil
	}
	// The bootstrap's output first: it may print anything.
	if i := strings.Index(line, bootstrapPrefix); i >= 0 {
		if b := w.res.Bootstrap; b != nil {
			b.tail = keepLast(b.tail, line[i+len(bootstrapPrefix):], 5)
		}
		return false, nil
	}
	if fb := w.res.FirstBoot; fb != nil && fb.Line(line) {
		for _, name := range []string{MilestoneFirstBootStart, MilestoneFirstBootDone} {
			if t, ok := fb.Times[name]; ok {
				w.res.observed.guestTime(name, t)
			}
		}
		return false, nil
	}
	if i := strings.Index(line, validate.Prefix+" "); i >= 0 {
		w.validation(line[i+len(validate.Prefix)+1:])
		return false, nil
	}
	if i := strings.Index(line, markerPrefix); i >= 0 {
		return w.marker(line[i+len(markerPrefix):], at)
	}
	switch {
	case w.stage == stageFirmware && kernelRE.MatchString(line):
		w.res.observed.kernel = &at
		w.setStage(stageKernel)
	case kernelRE.MatchString(line):
		// A kernel banner after the kernel started: the VM rebooted, and
		// not through the smoke script's one announced reboot (a
		// postinst, cloud-init's power_state, a bootstrap that reboots).
		// Its guest clock starts again at 0, so nothing after it could be
		// timed on this boot's clock: the run fails.
		return false, fmt.Errorf("the VM rebooted without the smoke script's reboot (a second kernel banner while the %s stage was on): %s", w.stage, w.context())
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

// marker takes one of the smoke's own lines: KEY, KEY=VALUE or KEY REST.
func (w *watcher) marker(m string, at time.Duration) (bool, error) {
	key, val := m, ""
	if i := strings.IndexAny(m, "= "); i >= 0 {
		key, val = m[:i], m[i+1:]
	}
	switch key {
	case "clock", "time", "systemd":
		var id string
		val, id = cutBoot(val)
		if use, err := w.checkBoot(id); !use {
			return false, err
		}
	}
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
	case "bootstrap-exit":
		if n, err := strconv.Atoi(val); err == nil && w.res.Bootstrap != nil {
			w.res.Bootstrap.Exit = &n
		}
	case "received-bytes":
		if n, err := strconv.ParseInt(val, 10, 64); err == nil && n >= 0 {
			n += w.receivedBefore
			w.res.ReceivedBytes = &n
		}
	case "clock":
		if f, err := strconv.ParseFloat(val, 64); err == nil {
			w.res.observed.clock(at, f)
		}
	case "time":
		w.guestTime(val)
	case "systemd":
		w.systemdTimes(val)
	case "reboot":
		// The first-boot path's smoke script reboots the VM once: the
		// first boot's times are kept, the second boot's follow, and its
		// smoke script reports again.
		if w.res.FirstBoot == nil || w.res.FirstBoot.Rebooted {
			return false, fmt.Errorf("the VM rebooted, which only the first-boot path does, once: %s", w.context())
		}
		w.res.FirstBoot.Rebooted = true
		w.rebootAnnounced = true
		if w.res.ReceivedBytes != nil {
			w.receivedBefore, w.res.ReceivedBytes = *w.res.ReceivedBytes, nil
		}
		w.res.observed.reboot(at, w.res.Bootstrap != nil)
		// The first boot's failed units stay a failure; its state and
		// command line are the second boot's to report.
		w.res.FailedUnitsBeforeReboot = append(w.res.FailedUnitsBeforeReboot, w.res.FailedUnits...)
		w.res.SystemState, w.res.FailedUnits, w.res.KernelCmdline = "", nil, ""
		w.grubErrors = nil
		w.setStage(stageFirmware)
	case "no-validation-script":
		return false, fmt.Errorf("the booted image has no validation script at %s", val)
	case "done":
		w.setStage(stageDone)
		return true, nil
	}
	return false, nil
}

// bootIDRE is the shape of /proc/sys/kernel/random/boot_id.
var bootIDRE = regexp.MustCompile(`^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$`)

// cutBoot takes the boot=ID field out of a timed line's value: the rest,
// and the id ("" when the line has none, an empty one, or one that is not
// a boot id: a kernel message written into the middle of the line on the
// serial console garbles it, and a garbled id is no other boot's).
func cutBoot(val string) (rest, id string) {
	fields := strings.Fields(val)
	kept := fields[:0]
	for _, f := range fields {
		if v, ok := strings.CutPrefix(f, "boot="); ok {
			if bootIDRE.MatchString(v) {
				id = v
			}
			continue
		}
		kept = append(kept, f)
	}
	return strings.Join(kept, " "), id
}

// checkBoot decides on a timed line of boot id: used when it is the boot
// being timed (the first id seen starts it), or the first line of the
// boot after the smoke script's announced reboot; a line without an id
// is not used (its time could be any boot's); a line of any other boot
// fails the run, since its time would be placed on another boot's clock:
// the VM rebooted without the smoke script's reboot (or came back from a
// boot before it).
func (w *watcher) checkBoot(id string) (use bool, err error) {
	switch {
	case id == "":
		return false, nil
	case w.bootID == "":
		// The first id seen, before or after an announced reboot: the
		// boot being timed from now on.
		w.bootID, w.rebootAnnounced = id, false
	case id == w.bootID && !w.rebootAnnounced:
	case id == w.bootID:
		return false, fmt.Errorf("a timed line of boot %s after the smoke script announced its reboot, before any line of the next boot: %s", id, w.context())
	case w.rebootAnnounced && !slices.Contains(w.earlierBoots, id):
		w.earlierBoots = append(w.earlierBoots, w.bootID)
		w.bootID, w.rebootAnnounced = id, false
	case slices.Contains(w.earlierBoots, id):
		return false, fmt.Errorf("a timed line of boot %s, a boot before the announced reboot, while boot %s was timed: %s", id, w.bootID, w.context())
	default:
		return false, fmt.Errorf("the VM rebooted without the smoke script's reboot: a timed line of boot %s while boot %s was timed: %s", id, w.bootID, w.context())
	}
	return true, nil
}

// guestTime records "MILESTONE=SECONDS", a milestone the guest's scripts
// timed with /proc/uptime.
func (w *watcher) guestTime(s string) {
	name, v, _ := strings.Cut(s, "=")
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return
	}
	w.res.observed.guestTime(name, f)
	if b := w.res.Bootstrap; b != nil && name == MilestoneBootstrapDone {
		if start, ok := w.res.observed.guest[MilestoneBootstrapStart]; ok {
			b.Seconds = round3(f - start)
		}
	}
}

// systemdTimes records "unit=UNIT Property=µs ...": the systemdTimes
// properties that are set (0 is a moment that did not come).
func (w *watcher) systemdTimes(s string) {
	props := keyValues(s)
	for _, t := range systemdTimes {
		if t.unit != props["unit"] {
			continue
		}
		us, err := strconv.ParseInt(props[t.property], 10, 64)
		if err != nil || us <= 0 {
			continue
		}
		sec := float64(us) / 1e6
		if t.milestone == MilestoneLoader {
			sec = -sec // the loader's time is counted back from the kernel's start
		}
		w.res.observed.guestTime(t.milestone, sec)
	}
}

// validation records one of the script's lines: status=PASS check=NAME
// detail=TEXT [remediation=TEXT], or the summary: summary [profile=P
// stage=S] checks=N failures=N warnings=N. Values are percent-encoded;
// keys it does not know are skipped, so older and newer scripts both read.
func (w *watcher) validation(s string) {
	if rest, ok := strings.CutPrefix(s, "summary "); ok {
		w.summary(keyValues(rest))
		return
	}
	kv := keyValues(s)
	l := Line{Status: kv["status"], Check: kv["check"], Detail: kv["detail"], Remediation: kv["remediation"]}
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

func (w *watcher) summary(kv map[string]string) {
	checks, err := strconv.Atoi(kv["checks"])
	if err != nil {
		return
	}
	w.res.summary = &summary{profile: kv["profile"], stage: kv["stage"], checks: checks}
}

// keyValues splits space-separated key=value fields, percent-decoding the
// values.
func keyValues(s string) map[string]string {
	kv := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		if dec, err := url.PathUnescape(v); err == nil {
			v = dec
		}
		kv[k] = v
	}
	return kv
}

func keepLast(lines []string, line string, n int) []string {
	lines = append(lines, line)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
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
		if w.bootstrapRunning() {
			return fmt.Sprintf("multi-user.target was reached but the boot never settled: the site bootstrap %s was still running (cloud-final waits for it)", w.res.Bootstrap.Bundle)
		}
		return "multi-user.target was reached but the boot never settled (a start job kept running)"
	default:
		return fmt.Sprintf("the validation did not finish (%d lines so far)", len(w.res.Lines))
	}
}

// bootstrapRunning reports a bootstrap that started and has not ended.
func (w *watcher) bootstrapRunning() bool {
	_, started := w.res.observed.guest[MilestoneBootstrapStart]
	_, ended := w.res.observed.guest[MilestoneBootstrapDone]
	return w.res.Bootstrap != nil && started && !ended
}

package smoke

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/builder/firstboot"
	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/validate"
)

// TimelineSchemaVersion is the version of the timeline file's JSON form.
const TimelineSchemaVersion = 1

// maxTimeline is the largest timeline file ReadTimeline reads: one holds a
// dozen milestones, a few kilobytes.
const maxTimeline = 1 << 20

// Milestones of the first boot, in the order a boot usually reaches them:
// validate's names (see validate.Milestones), one list for smoke's
// timeline and the validation script's result.
const (
	MilestoneQEMUStart       = validate.MilestoneQEMUStart
	MilestoneLoader          = validate.MilestoneLoader
	MilestoneKernel          = validate.MilestoneKernel
	MilestoneUserspace       = validate.MilestoneUserspace
	MilestoneCloudInitStart  = validate.MilestoneCloudInitStart
	MilestoneMultiUser       = validate.MilestoneMultiUser
	MilestoneBootstrapStart  = validate.MilestoneBootstrapStart
	MilestoneBootstrapDone   = validate.MilestoneBootstrapDone
	MilestoneCloudInitDone   = validate.MilestoneCloudInitDone
	MilestoneBootFinished    = validate.MilestoneBootFinished
	MilestoneValidationStart = validate.MilestoneValidationStart
	MilestoneValidationDone  = validate.MilestoneValidationDone
)

// Milestones only the first-boot path of a comparison has: the first-boot
// script's start and end (its own time lines, on the guest's clock as the
// smoke's scripts time theirs), and when the script requires a reboot, the
// reboot (when the smoke script announced it), the second kernel's start
// and the second boot's multi-user.target; the milestones before the
// reboot are the first boot's, the validation the second's.
const (
	MilestoneFirstBootStart  = firstboot.MilestoneStart
	MilestoneFirstBootDone   = firstboot.MilestoneDone
	MilestoneReboot          = "reboot"
	MilestoneRebootKernel    = "reboot-kernel"
	MilestoneRebootMultiUser = "reboot-multi-user"
)

// Where a milestone's time comes from.
const (
	sourceHost    = "host"    // the host's clock
	sourceConsole = "console" // the host's clock when the console showed it
	sourceSystemd = "systemd" // a systemd timestamp in the guest, monotonic
	sourceSmoke   = "smoke"   // /proc/uptime read by the smoke's own scripts
)

// milestoneCatalog is every milestone with its source, in the usual order.
var milestoneCatalog = []struct{ name, source string }{
	{MilestoneQEMUStart, sourceHost},
	{MilestoneLoader, sourceSystemd},
	{MilestoneKernel, sourceConsole},
	{MilestoneUserspace, sourceSystemd},
	{MilestoneCloudInitStart, sourceSystemd},
	{MilestoneMultiUser, sourceSystemd},
	{MilestoneBootstrapStart, sourceSmoke},
	{MilestoneBootstrapDone, sourceSmoke},
	{MilestoneCloudInitDone, sourceSystemd},
	{MilestoneBootFinished, sourceSystemd},
	{MilestoneValidationStart, sourceSmoke},
	{MilestoneValidationDone, sourceSmoke},
}

// firstBootCatalog are the milestones the first-boot path adds, and
// rebootCatalog those of its reboot.
var (
	firstBootCatalog = []struct{ name, source string }{
		{MilestoneFirstBootStart, sourceSmoke},
		{MilestoneFirstBootDone, sourceSmoke},
	}
	rebootCatalog = []struct{ name, source string }{
		{MilestoneReboot, sourceConsole},
		{MilestoneRebootKernel, sourceConsole},
		{MilestoneRebootMultiUser, sourceSystemd},
	}
)

// systemdTimes are the systemd timestamps the smoke script reports on the
// console (monotonic, in microseconds; 0 when it did not happen), and the
// milestones they are. "manager" is systemd itself (systemctl show without a
// unit); its loader timestamp counts back from the kernel's start.
var systemdTimes = []struct{ unit, property, milestone string }{
	{systemdManager, "LoaderTimestampMonotonic", MilestoneLoader},
	{systemdManager, "UserspaceTimestampMonotonic", MilestoneUserspace},
	{systemdManager, "FinishTimestampMonotonic", MilestoneBootFinished},
	{"cloud-init-local.service", "InactiveExitTimestampMonotonic", MilestoneCloudInitStart},
	{"multi-user.target", "ActiveEnterTimestampMonotonic", MilestoneMultiUser},
	// The process's exit, not the unit's activation: set when it failed too.
	{"cloud-final.service", "ExecMainExitTimestampMonotonic", MilestoneCloudInitDone},
}

const systemdManager = "manager"

// Timeline is the first boot as a smoke run saw it, every milestone on one
// clock (seconds since QEMU started), so that two images, or two versions
// of one, can be compared on the time between deploy and a validated host.
// It is written beside the console log as <name>-<version>.smoke-timeline.json.
type Timeline struct {
	SchemaVersion int    `json:"schema_version"`
	Image         string `json:"image"`
	Version       string `json:"version"`
	Profile       string `json:"profile"`
	Stage         string `json:"stage"`
	Accelerator   string `json:"accelerator"`
	// Passed is whether the smoke run passed: a failed run's timeline is
	// what it saw before it failed.
	Passed bool `json:"passed"`
	// QEMUStarted is when QEMU started (the zero of Seconds), wall clock.
	QEMUStarted time.Time `json:"qemu_started"`
	// GuestClockOffset is the time since QEMU started at which the guest's
	// monotonic clock read zero: the smallest difference between a guest
	// clock reading's arrival on the console and the reading. Guest times
	// are placed on the host's clock with it. It is about when the kernel
	// started; under TCG, where the kernel's first second runs on a slow
	// clock, up to a second after the kernel's banner.
	GuestClockOffset *float64 `json:"guest_clock_offset,omitempty"`
	// Milestones are the milestones seen, in time order.
	Milestones []Milestone `json:"milestones"`
	// Missing are the milestones expected but not seen: a boot that failed
	// early, a loader that does not report itself, cloud-init absent.
	Missing []string `json:"missing,omitempty"`
}

// Milestone is one moment of the boot.
type Milestone struct {
	Name string `json:"name"`
	// Seconds is the time since QEMU started.
	Seconds float64 `json:"seconds"`
	// Delta is the time since the previous milestone.
	Delta float64 `json:"delta"`
	// GuestSeconds is the guest's monotonic clock (since the kernel
	// started) for milestones the guest timed; negative before the kernel.
	GuestSeconds *float64 `json:"guest_seconds,omitempty"`
	// Source is where the time comes from: host, console (the host's clock
	// when the console showed it), systemd (a systemd timestamp in the
	// guest) or smoke (/proc/uptime read by the smoke's guest scripts).
	Source string `json:"source"`
}

// Find returns the named milestone, or nil.
func (t *Timeline) Find(name string) *Milestone {
	for i := range t.Milestones {
		if t.Milestones[i].Name == name {
			return &t.Milestones[i]
		}
	}
	return nil
}

// validatedOutOfOrder names the milestones of t that come after its
// validation-done ("" when none does, or t has no validation-done): every
// other milestone of the catalog precedes the validation's end, on either
// path (the first-boot path's first boot, reboot and second boot
// included), so one placed after it was timed on another boot's clock.
func (t *Timeline) validatedOutOfOrder() string {
	v := t.Find(MilestoneValidationDone)
	if v == nil {
		return ""
	}
	var late []string
	for _, m := range t.Milestones {
		if m.Name != MilestoneValidationDone && m.Seconds > v.Seconds {
			late = append(late, fmt.Sprintf("%s at %.1f s", m.Name, m.Seconds))
		}
	}
	if len(late) == 0 {
		return ""
	}
	return fmt.Sprintf("the timeline puts %s at %.1f s, before %s: the times are not of one boot (an unannounced reboot?)",
		MilestoneValidationDone, v.Seconds, strings.Join(late, ", "))
}

// observations are the times a boot's console carried, raw: the host's
// times as durations since QEMU started, the guest's as its monotonic
// clock in seconds.
type observations struct {
	qemuStarted time.Time
	kernel      *time.Duration
	// guestZero is the smallest (host arrival - guest clock) over the
	// guest's clock readings: each reading reaches the host a little after
	// it was taken, so the smallest difference is the closest estimate.
	guestZero *time.Duration
	guest     map[string]float64
	// rebootAt is when the first-boot path's VM rebooted (the console
	// showed the smoke script's reboot line); before holds the first
	// boot's milestones, on the host's clock, and the fields above are the
	// second boot's since.
	rebootAt *time.Duration
	before   map[string]Milestone
}

// reboot keeps the first boot's milestones and starts over for the second
// boot: its kernel, its guest clock.
func (o *observations) reboot(at time.Duration, withBootstrap bool) {
	ms, _ := o.timeline(withBootstrap, true)
	o.before = map[string]Milestone{}
	for _, m := range ms {
		o.before[m.Name] = m
	}
	o.rebootAt = &at
	o.kernel, o.guestZero, o.guest = nil, nil, nil
}

// clock records that a guest clock reading arrived on the console at host
// time at.
func (o *observations) clock(at time.Duration, guestSeconds float64) {
	zero := at - time.Duration(guestSeconds*float64(time.Second))
	if o.guestZero == nil || zero < *o.guestZero {
		o.guestZero = &zero
	}
}

// guestTime records a milestone timed by the guest.
func (o *observations) guestTime(name string, seconds float64) {
	if o.guest == nil {
		o.guest = map[string]float64{}
	}
	o.guest[name] = seconds
}

// timeline assembles what was observed, placing the guest's times on the
// host's clock. Milestones not observed are missing, never estimated; the
// bootstrap's are expected only when a bootstrap was to run.
func (o *observations) timeline(withBootstrap, firstBoot bool) (ms []Milestone, missing []string) {
	catalog := milestoneCatalog
	if firstBoot {
		catalog = append(slices.Clone(catalog), firstBootCatalog...)
	}
	if o.rebootAt != nil {
		catalog = append(slices.Clone(catalog), rebootCatalog...)
	}
	for _, c := range catalog {
		if !withBootstrap && (c.name == MilestoneBootstrapStart || c.name == MilestoneBootstrapDone) {
			continue
		}
		m, ok := o.afterReboot(c.name, c.source)
		if !ok {
			missing = append(missing, c.name)
			continue
		}
		ms = append(ms, m)
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Seconds < ms[j].Seconds })
	for i := range ms {
		if i > 0 {
			ms[i].Delta = round3(ms[i].Seconds - ms[i-1].Seconds)
		}
	}
	return ms, missing
}

// afterReboot is a milestone once the VM rebooted: the first boot's, but
// the validation's, which only the second boot has, the bootstrap's when
// it ran in the second boot, and the reboot's own.
func (o *observations) afterReboot(name, source string) (Milestone, bool) {
	if o.rebootAt == nil {
		return o.milestone(name, source)
	}
	switch name {
	case MilestoneReboot:
		return Milestone{Name: name, Source: source, Seconds: round3(o.rebootAt.Seconds())}, true
	case MilestoneRebootKernel:
		m, ok := o.milestone(MilestoneKernel, source)
		m.Name = name
		return m, ok
	case MilestoneRebootMultiUser:
		m, ok := o.milestone(MilestoneMultiUser, source)
		m.Name = name
		return m, ok
	case MilestoneValidationStart, MilestoneValidationDone:
		return o.milestone(name, source)
	case MilestoneBootstrapStart, MilestoneBootstrapDone:
		// The second boot's when the bootstrap waited for the reboot.
		if m, ok := o.milestone(name, source); ok {
			return m, true
		}
	}
	m, ok := o.before[name]
	return m, ok
}

func (o *observations) milestone(name, source string) (Milestone, bool) {
	m := Milestone{Name: name, Source: source}
	switch source {
	case sourceHost:
		return m, true
	case sourceConsole:
		if o.kernel == nil {
			return m, false
		}
		m.Seconds = round3(o.kernel.Seconds())
		return m, true
	}
	g, ok := o.guest[name]
	if !ok || o.guestZero == nil {
		return m, false
	}
	g = round3(g)
	m.GuestSeconds = &g
	m.Seconds = round3(o.guestZero.Seconds() + g)
	return m, true
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// newTimeline is the timeline of a run that booted, passed or not (passed:
// by its checks; a timeline out of order is not passed).
func newTimeline(r *Result, passed bool) *Timeline {
	o := &r.observed
	t := &Timeline{SchemaVersion: TimelineSchemaVersion, Image: r.Image, Version: r.Version, Profile: r.Profile,
		Stage: r.Stage, Accelerator: r.Accelerator, Passed: passed, QEMUStarted: o.qemuStarted}
	if o.guestZero != nil {
		z := round3(o.guestZero.Seconds())
		t.GuestClockOffset = &z
	}
	t.Milestones, t.Missing = o.timeline(r.Bootstrap != nil, r.FirstBoot != nil)
	// A run whose validation ended before a milestone that precedes it
	// did not pass, whatever its checks said (Result.Failure says why).
	t.Passed = passed && t.validatedOutOfOrder() == ""
	return t
}

// writeJSON writes v as indented JSON, atomically: the timeline and the
// comparison files.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadTimeline reads a timeline file a smoke run wrote.
func ReadTimeline(path string) (*Timeline, error) {
	b, err := readlimit.File(path, maxTimeline)
	if err != nil {
		return nil, err // it names path
	}
	var t Timeline
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("reading timeline %s: %w", path, err)
	}
	if t.SchemaVersion != TimelineSchemaVersion {
		return nil, fmt.Errorf("reading timeline %s: schema version %d, this imagectl reads %d", path, t.SchemaVersion, TimelineSchemaVersion)
	}
	return &t, nil
}

// MilestoneChange is one milestone of two timelines, in seconds since QEMU
// started; a side that lacks it is nil.
type MilestoneChange struct {
	Name     string   `json:"name"`
	Baseline *float64 `json:"baseline"`
	Current  *float64 `json:"current"`
	// Change is Current - Baseline: negative is sooner.
	Change *float64 `json:"change"`
}

// CompareTimelines pairs the milestones of a baseline timeline and a
// current one by name: the current's in order, then those only the
// baseline has.
func CompareTimelines(baseline, current *Timeline) []MilestoneChange {
	var out []MilestoneChange
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		c := MilestoneChange{Name: name}
		if m := baseline.Find(name); m != nil {
			c.Baseline = &m.Seconds
		}
		if m := current.Find(name); m != nil {
			c.Current = &m.Seconds
		}
		if c.Baseline != nil && c.Current != nil {
			d := round3(*c.Current - *c.Baseline)
			c.Change = &d
		}
		out = append(out, c)
	}
	for _, m := range current.Milestones {
		add(m.Name)
	}
	for _, m := range baseline.Milestones {
		add(m.Name)
	}
	return out
}

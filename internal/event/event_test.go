package event

import (
	"errors"
	"testing"
)

func TestReporter(t *testing.T) {
	var nilReporter Reporter
	nilReporter.Log("discarded")
	nilReporter.Phase("p", "s")(nil)

	var got []Event
	r := Reporter(func(e Event) { got = append(got, e) })
	r.Log("hello")
	done := r.Phase("pack", "the tgz")
	r.Progress("pack", 1, 2)
	done(errors.New("disk full"))
	r.Phase("check", "")(nil)

	if len(got) != 6 {
		t.Fatalf("got %d events: %+v", len(got), got)
	}
	for i, e := range got {
		if e.Time.IsZero() {
			t.Errorf("event %d has no time", i)
		}
	}
	want := []Event{
		{Type: TypeLog, Message: "hello"},
		{Type: TypePhase, Status: StatusStart, Phase: "pack", Summary: "the tgz"},
		{Type: TypeProgress, Phase: "pack", Done: 1, Total: 2},
		{Type: TypePhase, Status: StatusFailed, Phase: "pack", Summary: "the tgz", Message: "disk full"},
		{Type: TypePhase, Status: StatusStart, Phase: "check"},
		{Type: TypePhase, Status: StatusOK, Phase: "check"},
	}
	for i := range want {
		g := got[i]
		g.Time, g.Seconds = want[i].Time, 0
		if g != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, g, want[i])
		}
	}
}

package event

import (
	"errors"
	"reflect"
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
	r.Timings("base", 2.5, map[string]float64{"install": 2})

	if len(got) != 7 {
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
		{Type: TypeTimings, Layer: "base", Seconds: 2.5, Timings: map[string]float64{"install": 2}},
	}
	for i := range want {
		g := got[i]
		g.Time = want[i].Time
		if g.Type != TypeTimings {
			g.Seconds = 0
		}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("event %d = %+v, want %+v", i, g, want[i])
		}
	}
}

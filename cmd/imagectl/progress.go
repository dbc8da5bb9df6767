package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/textsafe"
)

// progress renders the events of a build, a smoke test or an upload: JSON
// lines for --output json, and for text one line per phase and step with
// its duration (a terminal also sees what is running now).
func progress(w io.Writer, jsonOut, terminal bool) func(event.Event) {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	return func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		if jsonOut {
			if e.Type == event.TypeProgress && e.Done != e.Total {
				return
			}
			_ = enc.Encode(e)
			return
		}
		ok, fail, run := "ok  ", "FAIL", "... "
		if terminal {
			ok, fail, run = "\x1b[32m✓\x1b[0m", "\x1b[31m✗\x1b[0m", "\x1b[2m…\x1b[0m"
		}
		// Summaries and messages carry what a recipe or a server said:
		// escaped, so that only our own colours drive the terminal.
		what := textsafe.Terminal(e.Phase)
		if e.Type == event.TypeStep {
			what = textsafe.Terminal(e.Layer + ": " + e.Summary)
		}
		switch {
		case e.Type == event.TypeLog:
			fmt.Fprintf(w, "     %s\n", textsafe.Terminal(e.Message))
		case e.Type == event.TypeProgress:
			if terminal && e.Total > 0 {
				fmt.Fprintf(w, "\r     %s %3d%%", what, e.Done*100/e.Total)
				if e.Done == e.Total {
					fmt.Fprintln(w)
				}
			}
		case e.Status == event.StatusStart:
			if terminal || e.Type == event.TypePhase {
				fmt.Fprintf(w, "%s %s\n", run, truncate(what, 110))
			}
		case e.Status == event.StatusOK:
			fmt.Fprintf(w, "%s %s (%s)\n", ok, truncate(what, 110), dur(e.Seconds))
		case e.Status == event.StatusFailed:
			fmt.Fprintf(w, "%s %s (%s)\n", fail, truncate(what, 110), dur(e.Seconds))
		}
	}
}

func dur(secs float64) string {
	return (time.Duration(secs * float64(time.Second))).Round(100 * time.Millisecond).String()
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

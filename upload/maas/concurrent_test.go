package maas_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// patient waits long for another uploader: a test machine under -race may
// pause one for a while, and a stalled file is deleted.
func patient(c *maas.Config) {
	c.StallTimeout, c.PollInterval = 5*time.Second, 2*time.Millisecond
}

// onlyOneComplete asserts that MAAS holds img once, complete, and that no
// client deleted anything (neither undid the other's work).
func onlyOneComplete(t *testing.T, sim *maassim.Server, img maas.Image) {
	t.Helper()
	holds(t, sim, img)
	if n := sim.Count(maassim.OpDelete); n != 0 {
		t.Errorf("%d deletes: an uploader deleted the other's work", n)
	}
}

func TestConcurrentUploadsOfTheSameImage(t *testing.T) {
	const chunks = 41 // of the image, the last one 3 bytes
	for _, tc := range []struct {
		name    string
		version string
		// joinAt is how many of the first uploader's chunks MAAS has
		// accepted when the second starts (0: both start together).
		joinAt int64
		// waitForJoin holds the first uploader there until the second
		// says it waits for the growing file.
		waitForJoin bool
	}{
		{name: "together"},
		{name: "together 3.4", version: "3.4"},
		{name: "second joins mid-upload", joinAt: 10, waitForJoin: true},
		{name: "second joins later", joinAt: chunks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := 0; round < 5; round++ {
				sim := maassim.New(maassim.Options{Version: tc.version})
				img := artifact(t, (chunks-1)*chunk+3)
				var (
					wg   sync.WaitGroup
					res  [2]*maas.Result
					errs [2]error
					recs = [2]*recorder{{}, {}}
					// joined starts the second uploader; waiting is
					// closed when it waits for the first's file.
					joined, waiting      = make(chan struct{}), make(chan struct{})
					join, joinedAt, wait sync.Once
					startJoin            = func() { join.Do(func() { close(joined) }) }
					events               [2]func(event.Event)
				)
				events[0] = func(e event.Event) {
					recs[0].add(e)
					if tc.joinAt == 0 || e.Type != event.TypeProgress || e.Done < min(tc.joinAt*chunk, e.Total) {
						return
					}
					joinedAt.Do(func() {
						startJoin()
						if tc.waitForJoin {
							select {
							case <-waiting:
							case <-time.After(10 * time.Second):
								t.Errorf("round %d: the second uploader did not wait for the growing file", round)
							}
						}
					})
				}
				events[1] = func(e event.Event) {
					recs[1].add(e)
					if e.Type == event.TypeLog && strings.Contains(e.Message, "is being uploaded") {
						wait.Do(func() { close(waiting) })
					}
				}
				for i := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if i == 0 {
							// A first uploader that fails early still
							// lets the second start.
							defer startJoin()
						} else if tc.joinAt > 0 {
							<-joined
						}
						// A client of its own, reading through a checked
						// reader of its own, as two imagectl processes would.
						c := newClient(t, sim, sim.AdminKey, patient)
						f, err := os.Open(img.Path)
						if err != nil {
							errs[i] = err
							return
						}
						defer f.Close()
						im := img
						im.Content, err = digest.NewCheckedReaderAt(f, img.Size, img.SHA256)
						if err != nil {
							errs[i] = err
							return
						}
						res[i], errs[i] = c.Upload(context.Background(), im, events[i])
					}()
				}
				wg.Wait()
				for i := range 2 {
					if errs[i] != nil {
						t.Fatalf("round %d: uploader %d: %v\nlog:\n%s", round, i, errs[i], recs[i].logs())
					}
					if f := res[i].Resource.File(); f == nil || !f.Complete || f.SHA256 != img.SHA256 {
						t.Fatalf("round %d: uploader %d returned %+v", round, i, res[i].Resource)
					}
				}
				onlyOneComplete(t, sim, img)
				sim.Close()
			}
		})
	}
}

// TestConcurrentUploadProcesses uploads the same image from two imagectl
// processes (this test binary, re-executed) to one simulated MAAS.
func TestConcurrentUploadProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	img := artifact(t, 60*chunk)
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUploadHelperProcess$")
		cmd.Env = append(os.Environ(), "MAAS_UPLOAD_HELPER=1", "HELPER_URL="+sim.URL, "HELPER_KEY="+sim.AdminKey,
			"HELPER_PATH="+img.Path, "HELPER_SHA256="+img.SHA256, "HELPER_SIZE="+strconv.FormatInt(img.Size, 10))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	onlyOneComplete(t, sim, img)
}

// TestUploadHelperProcess is the other process of
// TestConcurrentUploadProcesses.
func TestUploadHelperProcess(t *testing.T) {
	if os.Getenv("MAAS_UPLOAD_HELPER") != "1" {
		t.Skip("run by TestConcurrentUploadProcesses")
	}
	size, _ := strconv.ParseInt(os.Getenv("HELPER_SIZE"), 10, 64)
	c, err := maas.New(maas.Config{URL: os.Getenv("HELPER_URL"), APIKey: os.Getenv("HELPER_KEY"), ChunkSize: chunk,
		PollInterval: 2 * time.Millisecond, StallTimeout: 5 * time.Second, SettleTimeout: time.Second, CompleteTimeout: 5 * time.Second,
		Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	img := maas.Image{Path: os.Getenv("HELPER_PATH"), SHA256: os.Getenv("HELPER_SHA256"), Size: size, Name: "demo-1-0-0",
		Title: "Demo 1.0.0", Architecture: "amd64/generic", BaseImage: "ubuntu/noble"}
	res, err := c.Upload(context.Background(), img, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("sent %d, skipped %v, waited %v, restarts %d\n", res.Sent, res.Skipped, res.Waited, res.Restarts)
}

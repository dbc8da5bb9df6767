package maassim_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/upload/maassim"
)

// The racks know a file by its name on disk alone: its sha256 on 3.5.0
// and 3.5.1 (whose API gives no filename_on_disk), the API's short
// filename_on_disk from 3.5.2.
func TestRacksKnowFilesByTheVersionsNameOnDisk(t *testing.T) {
	for v, short := range map[string]bool{"3.5": false, "3.5.1": false, "3.5.2": true, "3.7": true} {
		t.Run(v, func(t *testing.T) {
			sim := maassim.New(maassim.Options{Version: v, Racks: []maassim.RackSpec{{}}})
			t.Cleanup(sim.Close)
			content := strings.NewReader(strings.Repeat("x", 4096))
			sha, onDisk, err := sim.Seed("x-1-0-0", "amd64/generic", content, 4096)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: sha[:7], false: sha}[short]; onDisk != want {
				t.Fatalf("name on disk %s, want %s", onDisk, want)
			}
			status := func(key string) int {
				resp, err := http.Get("http://" + sim.Racks()[0].Address + ":" + strconv.Itoa(sim.RackPort()) + "/images/" + key + "/custom/amd64/generic/x-1-0-0/uploaded/root.tgz")
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			other := sha
			if !short {
				other = sha[:7]
			}
			if got := status(onDisk); got != 200 {
				t.Errorf("by its name on disk: %d", got)
			}
			if got := status(other); got != 404 {
				t.Errorf("by %s: %d, want 404", other, got)
			}
		})
	}
}

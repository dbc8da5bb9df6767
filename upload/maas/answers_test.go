package maas_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/backoff"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// What MAAS writes in an error reaches the error escaped and on one line:
// it cannot retitle or clear the terminal, or print a line of its own.
func TestAPIErrorEscapesTheBody(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	sim.Inject(maassim.Fault{On: maassim.OpList, Kind: maassim.Refuse, Status: http.StatusBadRequest,
		Body: "bad request\x1b]0;owned\x07\x1b[2J\nerror: fake \u009b31m\u202e \xff"})
	_, err := newClient(t, sim, sim.AdminKey).List(context.Background(), "uploaded")
	want := `MAAS answered 400 Bad Request: bad request\x1b]0;owned\a\x1b[2J\nerror: fake \u009b31m\u202e \xff`
	if err == nil || !strings.Contains(err.Error(), want) || strings.ContainsAny(err.Error(), "\x1b\n\x07") {
		t.Fatalf("err %q\nwant it to hold %s", err, want)
	}
}

// A MAAS whose port refuses connections is reported within about the
// timeout, not after every backoff (the default schedule is 31 s).
func TestRefusedConnectionEndsWithinTheTimeout(t *testing.T) {
	url := "http://" + testenv.RefusedAddr(t) + "/MAAS"
	c, err := maas.New(maas.Config{URL: url, APIKey: "a:b:c", Timeout: 2 * time.Second, Backoff: backoff.Default})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.List(context.Background(), "uploaded")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "within the timeout of 2s") {
		t.Fatalf("err %v", err)
	}
	if took > 3*time.Second {
		t.Errorf("a refused connection took %v with a timeout of 2 s", took)
	}
}

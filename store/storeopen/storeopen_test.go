package storeopen

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/redact"
)

// TestOpenHidesCredentials: a store location with credentials, well-formed
// or not, is refused without quoting them, and they are registered so that
// no output shows them.
func TestOpenHidesCredentials(t *testing.T) {
	const pass = "St0rePassw0rdPlanted"
	for _, loc := range []string{
		"oci://user:" + pass + "@registry.example/x",
		"oci://" + pass + "@registry.example/x",
		"oci://registry.example/x?token=" + pass,
		"https://user:" + pass + "@registry.example/x",
		"oci//user:" + pass + "@registry.example/x",
	} {
		_, err := Open(context.Background(), Options{Store: loc, CacheDir: t.TempDir()})
		if err == nil {
			t.Errorf("%s: opened", loc)
			continue
		}
		if strings.Contains(err.Error(), pass) {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if got := redact.Known("x " + pass); strings.Contains(got, pass) {
		t.Errorf("the password is not registered: %s", got)
	}
}

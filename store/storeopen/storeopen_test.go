package storeopen

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/store"
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

// TestResolve: the flags win, then the variables, then the defaults; the CA
// variable applies to a registry alone.
func TestResolve(t *testing.T) {
	env := []string{"IMAGECTL_STORE=oci://env.example/x", "IMAGECTL_CATALOG=git@env:catalog", "IMAGECTL_REGISTRY_CA=/env/ca.pem", "IMAGECTL_CACHE_DIR=/env/cache"}
	for _, tc := range []struct {
		name string
		in   Options
		want Options
	}{
		{"flags", Options{Store: "oci://flag.example/x", Catalog: "flag-remote", CAFile: "/flag/ca.pem", CacheDir: "/flag/cache", Env: env},
			Options{Store: "oci://flag.example/x", Catalog: "flag-remote", CAFile: "/flag/ca.pem", CacheDir: "/flag/cache"}},
		{"variables", Options{Env: env},
			Options{Store: "oci://env.example/x", Catalog: "git@env:catalog", CAFile: "/env/ca.pem", CacheDir: "/env/cache"}},
		{"a directory ignores the CA variable", Options{Store: "some/dir", Env: env},
			Options{Store: "some/dir", Catalog: "git@env:catalog", CacheDir: "/env/cache"}},
		{"defaults", Options{Env: []string{"IMAGECTL_CACHE_DIR=/c"}},
			Options{Store: store.DefaultDir, CacheDir: "/c"}},
	} {
		got := Resolve(tc.in)
		got.Env = nil
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if Configured("", nil) || !Configured("x", nil) || !Configured("", []string{"IMAGECTL_STORE=y"}) {
		t.Error("Configured is wrong")
	}
}

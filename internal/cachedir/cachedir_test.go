package cachedir

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDefault(t *testing.T) {
	// The process's own, which the last cases fall back to.
	t.Setenv("XDG_CACHE_HOME", "/process-xdg")
	user, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"IMAGECTL_CACHE_DIR=/c", "XDG_CACHE_HOME=/x"}, "/c"},
		{[]string{"IMAGECTL_CACHE_DIR=", "XDG_CACHE_HOME=/x"}, "/x/imagectl"},
		{[]string{"XDG_CACHE_HOME=relative"}, filepath.Join(user, "imagectl")},
		{nil, filepath.Join(user, "imagectl")},
	} {
		got, err := Default(tc.env)
		if err != nil || got != tc.want {
			t.Errorf("Default(%q) = %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
}

package apply

import "testing"

// TestAptUpdateCmd: the build's apt-get update leaves out the Translation
// indexes only when NoTranslations, on its command line.
func TestAptUpdateCmd(t *testing.T) {
	for _, c := range []struct {
		no   bool
		want string
	}{
		{true, aptEnv + "apt-get update -q -o Acquire::Languages=none"},
		{false, aptEnv + "apt-get update -q"},
	} {
		if got := (&Applier{NoTranslations: c.no}).aptUpdateCmd(); got != c.want {
			t.Errorf("NoTranslations %v: %q, want %q", c.no, got, c.want)
		}
	}
}

package shell

import "testing"

func TestIsName(t *testing.T) {
	for s, want := range map[string]bool{
		"MAAS_KEY": true, "_x": true, "a1": true, "Path": true,
		"": false, "1A": false, "A-B": false, "A B": false, "A=B": false, "ÄB": false, "A\n": false,
	} {
		if got := IsName(s); got != want {
			t.Errorf("IsName(%q) = %v, want %v", s, got, want)
		}
	}
}

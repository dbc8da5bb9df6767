package environ

import "testing"

func TestLookup(t *testing.T) {
	env := []string{"A=1", "EMPTY=", "NOEQUALS", "A=2", "AB=3", "B=x=y"}
	for _, tc := range []struct {
		name, want string
		set        bool
	}{
		{"A", "2", true}, // the last wins, as in exec
		{"EMPTY", "", true},
		{"NOEQUALS", "", false},
		{"AB", "3", true},
		{"B", "x=y", true},
		{"C", "", false},
		{"", "", false},
	} {
		v, ok := Lookup(env, tc.name)
		if v != tc.want || ok != tc.set {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tc.name, v, ok, tc.want, tc.set)
		}
		if g := Get(env, tc.name); g != tc.want {
			t.Errorf("Get(%q) = %q, want %q", tc.name, g, tc.want)
		}
	}
	if v, ok := Lookup(nil, "A"); v != "" || ok {
		t.Errorf("nil env: %q, %v", v, ok)
	}
}

package hclkit

import "testing"

func TestSuggest(t *testing.T) {
	names := []string{"packages", "services", "maas280", "maas281"}
	for _, tc := range []struct {
		given string
		max   int
		want  string
	}{
		{"pakages", 2, "packages"},
		{"servcies", 2, "services"},
		{"maas28", 2, "maas280"}, // the first of equally close ones
		{"maas", 2, ""},
		{"maas", 3, "maas280"},
		{"kernel", 3, ""},
		{"", 2, ""},
	} {
		if got := Suggest(tc.given, names, tc.max); got != tc.want {
			t.Errorf("Suggest(%q, %d) = %q, want %q", tc.given, tc.max, got, tc.want)
		}
	}
}

package cache

import (
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"800M": 800 << 20, "50G": 50 << 30, "1073741824": 1 << 30, "2GiB": 2 << 30, "1kb": 1 << 10, "3T": 3 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-5M", "0", "lots", "5X"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) took it", in)
		}
	}
}

func TestBound(t *testing.T) {
	if o, err := Bound("", 0); err != nil || o.MaxBytes != -1 {
		t.Errorf("no bound: %+v %v; want everything (-1)", o, err)
	}
	if o, err := Bound("", time.Hour); err != nil || o.MaxBytes != 0 || o.OlderThan != time.Hour {
		t.Errorf("an age alone: %+v %v", o, err)
	}
	if o, err := Bound("1M", time.Hour); err != nil || o.MaxBytes != 1<<20 || o.OlderThan != time.Hour {
		t.Errorf("both: %+v %v", o, err)
	}
	if _, err := Bound("big", 0); err == nil {
		t.Error("a bad size is taken")
	}
}

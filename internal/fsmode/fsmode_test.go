package fsmode

import "testing"

func TestRoundTrip(t *testing.T) {
	for _, m := range []uint32{0o644, 0o755, 0o4755, 0o2750, 0o1777, 0o600} {
		if got := ToUnix(FromUnix(m)); got != m {
			t.Errorf("%04o round-trips to %04o", m, got)
		}
	}
	if s := String(FromUnix(0o4755)); s != "4755" {
		t.Errorf("String = %s", s)
	}
	if s := String(FromUnix(0o644)); s != "0644" {
		t.Errorf("String = %s", s)
	}
}

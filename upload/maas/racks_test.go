package maas_test

import (
	"testing"

	"github.com/gpuaas/imagectl/upload/maas"
)

func TestAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"3.5.0": true, "3.4.10": false, "3.5": true, "3.10.1": true, "2.9.2": false, "4.0": true,
		"3.5.0~rc1": true, "": false, "garbage": false} {
		if got := maas.AtLeast(v, 3, 5, 0); got != want {
			t.Errorf("AtLeast(%q, 3.5.0) = %v, want %v", v, got, want)
		}
	}
}

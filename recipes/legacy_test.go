package recipes

import (
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

const legacyRecipe = `
variable "size" {
  type       = string
  default    = "80G"
  legacy_env = "GPUAAS_MAAS_HOST_IMAGE_SIZE"
}
variable "token" {
  type       = string
  default    = ""
  sensitive  = true
  legacy_env = "GPUAAS_MAAS_HOST_IMAGE_TOKEN"
}
image "x" {
  title = "x"
  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
    size     = var.size
  }
}
`

func TestImagectlVarUndeclared(t *testing.T) {
	r, msgs := loadString(t, legacyRecipe, Inputs{Env: []string{"IMAGECTL_VAR_sise=90G"}})
	if r != nil {
		t.Fatal("an IMAGECTL_VAR_ for an undeclared variable was accepted")
	}
	if !strings.Contains(msgs, "IMAGECTL_VAR_sise is set") || !strings.Contains(msgs, "Did you mean IMAGECTL_VAR_size?") {
		t.Errorf("diagnostics: %s", msgs)
	}
}

func TestLegacyEnvWarns(t *testing.T) {
	r, msgs := loadString(t, legacyRecipe, Inputs{Env: []string{
		"GPUAAS_MAAS_HOST_IMAGE_SIZE=100G",
		"GPUAAS_MAAS_HOST_IMAGE_TOKEN=s3cret",
		"GPUAAS_MAAS_HOST_IMAGE_DRY_RUN=1",
		"GPUAAS_MAAS_HOST_IMAGE_UNKNOWN=1",
		"HOME=/root",
	}})
	if r == nil {
		t.Fatalf("warnings stopped the load: %s", msgs)
	}
	if v, src := varValue(r, "size"); v.AsString() != "80G" || src != "default" {
		t.Errorf("the old variable changed size: %s from %s", v.GoString(), src)
	}
	testenv.Holds(t, "the warnings", msgs,
		"GPUAAS_MAAS_HOST_IMAGE_SIZE is set, but imagectl does not read the old pipeline's environment: use -var 'size=100G' (or IMAGECTL_VAR_size).",
		"use -var 'token=...'",
		"GPUAAS_MAAS_HOST_IMAGE_DRY_RUN is set",
		"--dry-run",
		"GPUAAS_MAAS_HOST_IMAGE_UNKNOWN is set")
	if strings.Contains(msgs, "s3cret") {
		t.Error("a sensitive value was echoed")
	}
	if n := strings.Count(msgs, "Old pipeline setting ignored"); n != 4 {
		t.Errorf("%d warnings, want 4:\n%s", n, msgs)
	}
}

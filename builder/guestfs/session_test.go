//go:build guestfs

package guestfs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/internal/shell"
)

// TestOpenLaunchesAgainWhenTheKernelSwapsTheDisks: the appliance's kernel
// probes its disks in no fixed order (see Open). A QEMU wrapper puts the
// appliance's own disk before the image's on the SCSI bus at the first
// launch, which makes the kernel name the image's disk /dev/sdb most of
// the time (3 of 4 tries here). Open must then launch again, once a
// swapped launch, and the session it returns has the image's disk at
// /dev/sda as the guest's own grub-probe sees it (the hint grub-mkconfig
// writes into grub.cfg). Without the relaunch the test fails whenever
// the wrapper's swap took.
func TestOpenLaunchesAgainWhenTheKernelSwapsTheDisks(t *testing.T) {
	if testing.Short() {
		t.Skip("launches libguestfs appliances")
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	base, _ := baseImage(t)
	dir := t.TempDir()
	overlay := filepath.Join(dir, "o.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, overlay).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	launches := filepath.Join(dir, "launches")
	wrapper := filepath.Join(dir, "qemu")
	script := fmt.Sprintf(`#!/bin/sh
# libguestfs's probes of QEMU pass through; launches are counted, and the
# first one gets the appliance's disk before the image's.
case " $* " in *" scsi-hd,drive=hd0 "*) ;; *) exec %[1]s "$@" ;; esac
n=$(($(cat %[2]s 2>/dev/null || echo 0) + 1))
echo "$n" > %[2]s
[ "$n" -gt 1 ] && exec %[1]s "$@"
for a; do
  shift
  case $a in
    scsi-hd,drive=hd0) a=scsi-hd,drive=appliance ;;
    scsi-hd,drive=appliance) a=scsi-hd,drive=hd0 ;;
  esac
  set -- "$@" "$a"
done
exec %[1]s "$@"
`, shell.Quote(qemu), shell.Quote(launches))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LIBGUESTFS_HV", wrapper)

	ctx := context.Background()
	var logs []string
	sess, err := Executor{}.Open(ctx, overlay, guest.SessionOptions{Log: func(s string) { logs = append(logs, s); t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	s := sess.(*session)
	if named, err := s.FirstDrive(ctx); err != nil || named != firstDrive {
		t.Errorf("the session's kernel named the image's disk %q (%v), want %s", named, err, firstDrive)
	}
	if hint, err := s.Run(ctx, "grub-probe --target=compatibility_hint /"); err != nil || strings.TrimSpace(hint) != "hd0,gpt1" {
		t.Errorf("grub-probe's hint for the guest's root: %q (%v), want hd0,gpt1", hint, err)
	}
	b, err := os.ReadFile(launches)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	again := 0
	for _, l := range logs {
		if strings.Contains(l, "launching it again") {
			again++
		}
	}
	if again != n-1 {
		t.Errorf("%d launches, %d said to be launched again: %q", n, again, logs)
	}
	t.Logf("%d launches", n)
}

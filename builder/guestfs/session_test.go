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
// the time (3 of 4 tries here); later launches are left alone. Open must
// launch again after each launch that named it otherwise, saying so, and
// what the session says the kernel named the disk is what the guest's own
// grub-probe sees (the hint grub-mkconfig writes into grub.cfg): hd0 for
// /dev/sda, and /dev/sda unless Open gave up after launchTries launches.
// TestUntilFirstDrive covers the rule launch by launch.
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
	named, err := s.FirstDrive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hint, err := s.Run(ctx, "grub-probe --target=compatibility_hint /")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"/dev/sda": "hd0,", "/dev/sdb": "hd1,"}[named]; want == "" || !strings.HasPrefix(strings.TrimSpace(hint), want) {
		t.Errorf("the session's kernel named the image's disk %q; grub-probe's hint for the guest's root is %q", named, hint)
	}
	b, err := os.ReadFile(launches)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	again, gaveUp := 0, false
	for _, l := range logs {
		again += strings.Count(l, "launching it again")
		gaveUp = gaveUp || strings.Contains(l, fmt.Sprintf("in each of %d launches", launchTries))
	}
	if again != n-1 {
		t.Errorf("%d launches, %d said to be launched again: %q", n, again, logs)
	}
	if named != firstDrive && (!gaveUp || n != launchTries) {
		t.Errorf("kept a session whose kernel named the image's disk %s after %d launches, without giving up: %q", named, n, logs)
	}
	if n == 1 {
		t.Log("the wrapper's swap did not take this time: the first launch named the disk /dev/sda")
	}
	t.Logf("%d launches", n)
}

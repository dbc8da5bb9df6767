package ext4tartest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// Run runs a command; the test fails with its command line and output if
// the command fails.
func Run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// Mkfs makes img an ext4 filesystem of size (as mke2fs reads it) holding
// the tree dir, 4 KiB blocks and the root owned by root; opts are more
// mke2fs options.
func Mkfs(t testing.TB, dir, img, size string, opts ...string) {
	t.Helper()
	args := append([]string{"-q", "-t", "ext4", "-F", "-b", "4096", "-E", "root_owner=0:0", "-d", dir}, opts...)
	Run(t, "mke2fs", append(args, img, size)...)
}

// GPTDisk makes disk a 24 MiB GPT disk laid out like the project's base
// image: partition 1 a small ESP-like filler, partition 2 (16 MiB) the
// root, holding the filesystem image fsImg.
func GPTDisk(t testing.TB, fsImg, disk string) {
	t.Helper()
	Run(t, "truncate", "-s", "24M", disk)
	Run(t, "sgdisk", "-n", "1:2048:+1M", "-t", "1:ef00", "-n", "2:0:+16M", "-t", "2:8300", disk)
	out, err := exec.Command("sgdisk", "-i", "2", disk).Output()
	if err != nil {
		t.Fatal(err)
	}
	var first int64
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "First sector:") {
			fmt.Sscanf(strings.TrimPrefix(l, "First sector:"), "%d", &first)
		}
	}
	Run(t, "dd", "status=none", "conv=notrunc", "bs=512", fmt.Sprintf("seek=%d", first), "if="+fsImg, "of="+disk)
}

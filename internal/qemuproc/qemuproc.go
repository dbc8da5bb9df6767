// Package qemuproc finds and stops the QEMU processes this process started:
// a libguestfs launch cancelled, or hung, before the appliance's PID is
// known, and the tests' check that nothing is left running.
package qemuproc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// KillChildren kills the live QEMU processes whose parent is this process.
func KillChildren() {
	for _, pid := range Children() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// KillChildrenWithDrive kills the live QEMU processes whose parent is
// this process and that have disk as a drive (an argument
// "file=PATH,...", PATH disk's real path with its commas doubled, as
// libguestfs passes a drive), leaving the others (other appliances, VMs)
// running. It returns how many it killed.
func KillChildrenWithDrive(disk string) int {
	p, err := filepath.Abs(disk)
	if err != nil {
		return 0
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		p = filepath.Join(dir, filepath.Base(p))
	}
	arg := "file=" + strings.ReplaceAll(p, ",", ",,") + ","
	n := 0
	for _, pid := range Children() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if strings.HasPrefix(a, arg) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
				break
			}
		}
	}
	return n
}

// Children lists the live QEMU processes whose parent is this process.
func Children() []int {
	self := os.Getpid()
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces.
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) < 2 || fields[0] == "Z" || !strings.HasPrefix(s[open+1:close], "qemu") {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == self {
			pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
			pids = append(pids, pid)
		}
	}
	return pids
}

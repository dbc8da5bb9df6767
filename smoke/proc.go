package smoke

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

func numCPU() int { return runtime.NumCPU() }

// killChildQEMU kills the QEMU processes this process started: a deploy
// cancelled during the appliance's launch, before its PID is known.
// (builder/guestfs has the same for builds; it keeps its copy unexported.)
func killChildQEMU() {
	for _, pid := range childQEMUs() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// childQEMUs lists the live QEMU processes whose parent is this process.
func childQEMUs() []int {
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

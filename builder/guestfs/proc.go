package guestfs

import (
	"os"
	"runtime"
	"strconv"
)

func numCPU() int { return runtime.NumCPU() }

func fdPath(f *os.File) string { return "/dev/fd/" + strconv.Itoa(int(f.Fd())) }

package smoke

import "runtime"

func numCPU() int { return runtime.NumCPU() }

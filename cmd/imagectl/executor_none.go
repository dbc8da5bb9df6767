//go:build !guestfs

package main

import "github.com/gpuaas/imagectl/builder"

// Without the guestfs tag imagectl is CGO-free and can plan, validate and
// format but not build; builder.Build says so.
func newExecutor() builder.Executor { return nil }

//go:build !guestfs

package main

import "github.com/gpuaas/imagectl/builder/guest"

// Without the guestfs tag imagectl is CGO-free and can plan, validate and
// format but not build; builder.Build says so.
func newExecutor() guest.Executor { return nil }

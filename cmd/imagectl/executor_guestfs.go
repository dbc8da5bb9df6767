//go:build guestfs

package main

import (
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/builder/guestfs"
)

func newExecutor() guest.Executor { return guestfs.Executor{} }

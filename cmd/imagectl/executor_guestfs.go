//go:build guestfs

package main

import (
	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/guestfs"
)

func newExecutor() builder.Executor { return guestfs.Executor{} }

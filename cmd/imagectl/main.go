// Command imagectl builds curated MAAS host images from HCL recipes.
//
// This package is the thin CLI on top: it parses flags, calls one library
// function per command and prints the result. Everything else lives in the
// packages under the module root.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Environ())
	stop()
	os.Exit(code)
}

// Command imagectl builds curated MAAS host images from HCL recipes.
//
// This package is the CLI on top, and only translates: each command is a
// flags struct, a newXCmd that registers them, and a runX that checks them,
// calls the library that owns the command (build alone runs three in turn:
// plan, builder, and release for the store) and writes the result, as text
// or --output json. Defaults from the environment, key and site
// resolution, and building into a store live in the libraries
// (storeopen.Resolve, sites.VerifyPolicy, release); everything else lives
// in the packages under the module root.
//
// SIGINT and SIGTERM cancel the context every command runs under: the
// command stops, cleans up and exits with status 130. A second one exits
// at once with status 130, whatever the command is doing, so that nothing
// (a read that blocks, a parse that does not look at the context) can keep
// imagectl alive.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// exitInterrupted is the exit status of an interrupted imagectl, as shells
// report a process that SIGINT ended.
const exitInterrupted = 130

func main() {
	ctx, stop := interruptContext(os.Stderr, os.Exit)
	code := run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Environ())
	stop()
	os.Exit(code)
}

// interruptError is the cause of a context that a signal cancelled.
type interruptError struct{ sig os.Signal }

func (e interruptError) Error() string { return "interrupted by " + signalName(e.sig) }

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// interruptContext returns a context that the first SIGINT or SIGTERM
// cancels, with an interruptError as its cause. The second calls exit with
// exitInterrupted at once. Both say so on stderr. stop releases the
// signals.
func interruptContext(stderr io.Writer, exit func(int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(stderr, "imagectl: %s: stopping (send it again to exit at once)\n", signalName(sig))
			cancel(interruptError{sig})
		case <-done:
			return
		}
		select {
		case sig := <-sigs:
			fmt.Fprintf(stderr, "imagectl: %s again: exiting at once with status %d, without cleaning up\n", signalName(sig), exitInterrupted)
			exit(exitInterrupted)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

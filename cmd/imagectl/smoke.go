package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/smoke"
)

func newSmokeCmd(env []string) *cobra.Command {
	var (
		opts   smoke.Options
		output string
	)
	cmd := &cobra.Command{
		Use:   "smoke ARTIFACT.tgz",
		Short: "Deploy a tgz the way MAAS/curtin does, boot it under UEFI and run its validation",
		Long: `Smoke proves on the build machine that an artifact deploys, boots and passes
its own validation, before anyone uploads it.

It lays the tgz onto a scratch disk in one libguestfs appliance as curtin lays
a tgz custom image onto a node with MAAS's flat UEFI layout (GPT, 512 MiB ESP
on /boot/efi, ext4 root; curtin's tar flags; fstab by UUID; a missing initramfs
created (every one rebuilt with --update-initramfs);
GRUB installed for UEFI from inside the image with update-grub, so the
recipe's kernel args reach the kernel command line; a NoCloud seed in place of
MAAS's metadata), boots it in QEMU with OVMF (KVM when usable, else TCG), and
on first boot runs the baked validation script named by the manifest beside
the tgz, reading its lines from the serial console.

It prints every line and exits 1 on any FAIL, on a boot that does not reach
multi-user.target or settles degraded (the failed units are named), or on a
timeout. The console log is kept beside the tgz (<name>-<version>.smoke.log);
the scratch disk and QEMU are removed on every path, Ctrl-C included.`,
		Example: `  imagectl smoke artifacts/imagectl-demo-0.1.0.tgz
  imagectl smoke artifacts/x-1.4.0.tgz --timeout 30m --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", output)
			}
			if opts.Timeout < 0 {
				return fmt.Errorf("--timeout must not be negative")
			}
			out := cmd.OutOrStdout()
			opts.Events = progress(cmd.ErrOrStderr(), false, isTerminal(cmd.ErrOrStderr(), env))
			if output == "json" {
				opts.Events = progress(out, true, false)
			}
			res, err := smoke.Run(cmd.Context(), args[0], opts)
			if res == nil {
				return err
			}
			if output == "json" {
				v := map[string]any{"type": "result", "passed": err == nil, "result": res}
				if err != nil {
					v["error"] = err.Error()
				}
				if jerr := json.NewEncoder(out).Encode(v); jerr != nil {
					return jerr
				}
			} else if _, booted := res.Seconds[smoke.PhaseBoot]; booted {
				printSmoke(out, res)
			}
			if errors.Is(err, smoke.ErrFailed) {
				fmt.Fprintf(cmd.ErrOrStderr(), "imagectl: %v\n", err)
				return exitError{1}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&opts.Manifest, "manifest", "", "the build manifest (default: the .manifest.json beside the tgz)")
	cmd.Flags().StringVar(&opts.ConsoleLog, "console-log", "", "where to keep the serial console (default: <name>-<version>.smoke.log beside the tgz)")
	cmd.Flags().StringVar(&opts.WorkDir, "work-dir", "", "where the scratch disk goes while the test runs, sparse, up to the unpacked image's size (default: $TMPDIR)")
	cmd.Flags().StringVar(&opts.Accel, "accel", "auto", "accelerator for the appliance and the VM: auto (KVM when it works, else TCG), kvm or tcg")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "limit for the boot and the validation (default 15m under TCG, 5m under KVM)")
	cmd.Flags().IntVar(&opts.MemoryMB, "memory", 2048, "the VM's memory in MiB")
	cmd.Flags().BoolVar(&opts.UpdateInitramfs, "update-initramfs", false, "rebuild every initramfs as curtin does, which catches DKMS modules that fail to build (slow under TCG; a missing initramfs is always created)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (one JSON event per line, then the result)")
	return cmd
}

func printSmoke(w io.Writer, r *smoke.Result) {
	for _, l := range r.Lines {
		fmt.Fprintf(w, "%-4s %s: %s\n", l.Status, l.Check, l.Detail)
	}
	if r.SystemState != "" {
		fmt.Fprintf(w, "boot: system %s", r.SystemState)
		for i, u := range r.FailedUnits {
			if i == 0 {
				fmt.Fprint(w, ", failed units:")
			}
			fmt.Fprint(w, " ", u)
		}
		fmt.Fprintln(w)
	}
	if r.KernelCmdline != "" {
		fmt.Fprintf(w, "kernel command line: %s\n", r.KernelCmdline)
	}
	total := 0.0
	for _, s := range r.Seconds {
		total += s
	}
	fmt.Fprintf(w, "%d checks, %d failed, %d warnings; %s under %s (deploy %s, boot %s, validate %s)\nconsole log: %s\n",
		len(r.Lines), r.Failures, r.Warnings, secs(total), r.Accelerator, secs(r.Seconds[smoke.PhaseDeploy]),
		secs(r.Seconds[smoke.PhaseBoot]), secs(r.Seconds[smoke.PhaseValidate]), r.ConsoleLog)
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

package base

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// ToRaw writes a sparse raw copy of the base image at image, in format
// ("" is raw), to raw with qemu-img convert: the disk a build grows and
// customizes, and the disk the smoke comparison packs the first-boot
// path's root filesystem from. A cancelled conversion returns the
// context's error.
func ToRaw(ctx context.Context, image, format, raw string) error {
	if format == "" {
		format = "raw"
	}
	out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-q", "-f", format, "-O", "raw", image, raw).CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("qemu-img convert -f %s -O raw: %v: %s", format, err, strings.TrimSpace(string(out)))
	}
	return nil
}

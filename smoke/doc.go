// Package smoke owns the smoke test of a built artifact: it deploys the tgz
// onto a scratch disk the way MAAS and curtin deploy a tgz custom image
// (flat UEFI layout, curtin's extraction, fstab and GRUB steps, a NoCloud
// seed in place of MAAS's metadata), boots that disk in QEMU with UEFI
// firmware, and reads the image's own validation script's results from the
// serial console. The deploy needs libguestfs, so it is built only with the
// guestfs tag; without it Run says so. The boot needs QEMU and OVMF.
package smoke

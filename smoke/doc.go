// Package smoke owns the smoke test of a built artifact: it deploys the tgz
// onto a scratch disk the way MAAS and curtin deploy a tgz custom image
// (flat UEFI layout, curtin's extraction, fstab and GRUB steps, a NoCloud
// seed in place of MAAS's metadata and deploy user-data, which at stage
// converged runs the profile's site bootstrap), boots that disk in QEMU
// with UEFI firmware, and reads the image's own validation script's
// results for one profile and stage from the serial console, with the
// first boot's timeline (written beside the console log, comparable
// between runs): every time the guest reports carries its boot id, and a
// time from a boot the smoke script did not announce (its one reboot on
// the first-boot path) fails the run, as does a timeline whose validation
// ends before a milestone that precedes it. On request the seed also authorizes SSH keys for a login
// with passwordless sudo, QEMU forwards a loopback port to the guest's ssh,
// and the VM stays up after its validation until the caller's checks
// (Options.WhileUp) return, when QEMU presses its power button. The deploy runs in a libguestfs appliance
// (internal/appliance, as builds do), so it is built only with the guestfs
// tag; without it Run says so. The boot needs QEMU and OVMF. Progress is
// reported as internal/event events, as builds and uploads report theirs.
// Compare boots the tgz and the recipe's base image with its first-boot
// script (builder/firstboot) under the same conditions, in one pair or
// several in alternating order, and compares the two paths: their
// timelines, times to validated, received bytes, and the work the first
// boot did not do as the build did.
package smoke

// Package guestfs is the libguestfs executor of imagectl builds: one
// appliance per build, with the guest's filesystems mounted, running every
// step through libguestfs's chrooted commands and file calls (the guest is
// never booted). It needs cgo and libguestfs, so everything but doc.go and
// the accelerator probe is built only with the guestfs tag.
package guestfs

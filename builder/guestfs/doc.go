// Package guestfs is the libguestfs executor of imagectl builds: one
// appliance per build (an internal/appliance handle), with the guest's
// root grown to the disk and its filesystems mounted, running every step
// through libguestfs's chrooted commands and file calls (the guest is never
// booted). It launches the appliance again when its kernel named the
// image's disk other than libguestfs does (see Open). It needs cgo and
// libguestfs, so everything but doc.go and that relaunch rule
// (relaunch.go) is built only with the guestfs tag.
package guestfs

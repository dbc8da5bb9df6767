// Package appliance owns imagectl's libguestfs appliance: deciding how it
// runs (KVM when QEMU can use it, TCG otherwise, saying which and why),
// launching one on a disk image, and the Handle that builds
// (builder/guestfs adapts it to builder/guest's Session) and smoke deploys work
// through. A Handle serializes calls, as libguestfs requires; a cancelled
// context, Kill or Close from another goroutine during a call kills the
// appliance's QEMU, so the call returns at once; Close shuts the appliance
// down and releases the handle on every path. The handle needs cgo and
// libguestfs, so everything but doc.go, the accelerator probe and the call
// guard is built only with the guestfs tag.
package appliance

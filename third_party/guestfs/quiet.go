package guestfs

// This file is imagectl's, not generated: libguestfs prints every error on
// stderr through its default handler as well as returning it, which would
// spray appliance internals over imagectl's own error messages.

/*
#cgo LDFLAGS: -lguestfs
#include <stdlib.h>
#include "guestfs.h"
*/
import "C"

// Quiet removes the default error handler: errors are still returned by
// every call, and only there.
func (g *Guestfs) Quiet() {
	if g.g != nil {
		C.guestfs_set_error_handler(g.g, nil, nil)
	}
}

// Package guestfs is libguestfs's Go binding. Debian ships it as source
// only (golang-guestfs-dev: /usr/share/gocode/src/libguestfs.org/guestfs/
// guestfs.go) and it is not on the module proxy, so `make guestfs-binding`
// copies that file here; this module and the replace line in imagectl's
// go.mod make it importable. Only code built with the guestfs tag uses it.
// quiet.go is imagectl's own addition (an error-handler switch the
// generated binding lacks).
package guestfs

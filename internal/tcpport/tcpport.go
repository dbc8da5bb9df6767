// Package tcpport owns holding a TCP port on 127.0.0.1 that nothing
// serves: a socket bound to a free port that never listens, without
// SO_REUSEADDR, so that no other socket may bind the port while it is
// held and a connection to it is refused. imagectl smoke holds the port
// QEMU will forward to a VM's ssh through the minutes of its deploy; tests
// hold a port that must stay refused for as long as they run.
package tcpport

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Reserve binds a socket to a free TCP port on 127.0.0.1 and returns it,
// to be closed once whatever the port is for binds it, and the port.
func Reserve() (io.Closer, int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("reserving a port on 127.0.0.1: %w", err)
	}
	hold := os.NewFile(uintptr(fd), "a reserved port on 127.0.0.1")
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		hold.Close()
		return nil, 0, fmt.Errorf("reserving a port on 127.0.0.1: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		hold.Close()
		return nil, 0, fmt.Errorf("reserving a port on 127.0.0.1: %w", err)
	}
	return hold, sa.(*syscall.SockaddrInet4).Port, nil
}

package tcpport

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// A reserved port stays the holder's: no other socket can bind it, not
// even with SO_REUSEADDR (Go's listeners set it) or on every address; a
// connection to it is refused; and it is free once let go.
func TestReserve(t *testing.T) {
	hold, port, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("another listener took the reserved port %d", port)
	}
	if l, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(port))); err == nil {
		l.Close()
		t.Fatalf("a listener on every address took the reserved port %d", port)
	}
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Fatalf("a connection to the reserved port %d was accepted", port)
	}
	hold.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port %d is not free once released: %v", port, err)
	}
	l.Close()
}

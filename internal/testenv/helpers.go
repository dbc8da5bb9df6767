package testenv

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gpuaas/imagectl/internal/tcpport"
)

// Holds checks that got, an output (what says which), holds each of wants,
// and names each it lacks.
func Holds(t testing.TB, what, got string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, got)
		}
	}
}

// Buffer collects what goroutines write while others read it (a child
// process's output, a logger's lines): a bytes.Buffer under a mutex.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// FreePort is a local TCP port no server has now: one listened on and
// closed again, for a server a test starts on it.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// RefusedAddr is the host:port of a local TCP port that refuses
// connections for as long as the test runs: held (tcpport) until its
// cleanup, so no server another test or process starts meanwhile can
// take it.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	hold, port, err := tcpport.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close() })
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

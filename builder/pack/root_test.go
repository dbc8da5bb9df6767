package pack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder/ext4tar/ext4tartest"
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestPackRelaunchesForALaterRefusal: a filesystem whose features the host
// reader takes but one of whose inodes it refuses (here a file flagged
// compressed, which no probe of the superblock sees) is packed through a
// new appliance session in auto mode, saying why, and refused in host
// mode; neither leaves a tgz behind. The session is this test's error: no
// appliance is launched.
func TestPackRelaunchesForALaterRefusal(t *testing.T) {
	for _, tool := range []string{"mke2fs", "debugfs"} {
		testenv.Tool(t, tool, "make deps installs e2fsprogs")
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "root.ext4")
	ext4tartest.Mkfs(t, src, img, "16M")
	ext4tartest.Run(t, "debugfs", "-w", "-R", "sif /f flags 0x80004", img) // extents | COMPR
	mounts := []guest.Mount{{Point: "/", Device: "/dev/sda", Partition: 0, Type: "ext4"}}
	errNoAppliance := errors.New("no appliance in this test")
	for _, mode := range []string{"auto", "host"} {
		t.Run(mode, func(t *testing.T) {
			var logs []string
			reopened := 0
			p := Root{Mode: mode, Disk: img, Level: 1, Log: func(s string) { logs = append(logs, s) },
				Reopen: func() (guest.Session, error) { reopened++; return nil, errNoAppliance }}
			tgz := filepath.Join(t.TempDir(), "out.tgz")
			_, _, _, err := p.Pack(context.Background(), nil, mounts, tgz)
			switch mode {
			case "auto":
				said := strings.Join(logs, "\n")
				if !errors.Is(err, errNoAppliance) || reopened != 1 || !strings.Contains(said, "launching it again") || !strings.Contains(said, "cannot read f on the host") {
					t.Errorf("got %v, %d reopens, logs %q; want the appliance launched again, saying why", err, reopened, said)
				}
			case "host":
				if err == nil || !strings.Contains(err.Error(), "packing the root filesystem on the host") || reopened != 0 {
					t.Errorf("got %v, %d reopens; want a refusal and no appliance", err, reopened)
				}
			}
			if entries, _ := os.ReadDir(filepath.Dir(tgz)); len(entries) > 0 {
				t.Errorf("left behind: %v", entries)
			}
		})
	}
}

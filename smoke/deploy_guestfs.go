//go:build guestfs

package smoke

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/pgzip"
	"libguestfs.org/guestfs"

	"github.com/gpuaas/imagectl/internal/appliance"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/internal/shell"
)

// GPT partition types of MAAS's flat layout on UEFI.
const (
	espType   = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
	linuxType = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
	// MAAS's flat layout: a 512 MiB ESP first, the root after it.
	espSectors = 512 << 20 / 512
)

// target is the scratch disk in a libguestfs appliance, as curtin's
// target directory: the new root, mounted, with the ESP at /boot/efi.
type target struct{ *appliance.Handle }

func canDeploy() error { return nil }

// deploy lays tgz onto a new raw disk as curtin lays a tgz custom image
// onto a node with MAAS's flat storage layout on UEFI, in one libguestfs
// appliance. Each step names the curtin behaviour it mirrors.
func deploy(ctx context.Context, tgz, disk string, c deployConfig) (*deployed, error) {
	log := c.log
	if log == nil {
		log = func(string) {}
	}
	f, err := os.OpenFile(disk, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating the scratch disk: %w", err)
	}
	err = f.Truncate(c.size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("creating the scratch disk: %w", err)
	}
	h, err := appliance.Launch(ctx, disk, appliance.Options{
		Identifier: "imagectl-smoke", Accel: c.accel,
		// The scratch disk is thrown away after the boot.
		Format: "raw", Log: log,
	})
	if err != nil {
		return nil, err
	}
	// Close on every path; the first one, on success, reports the write
	// errors of the unmount and shutdown.
	defer h.Close()
	a := target{h}
	dep, err := a.deploy(ctx, tgz, c, log)
	if err == nil {
		if err = h.Close(); err != nil {
			err = fmt.Errorf("closing the scratch disk: %w", err)
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return dep, err
}

// run runs a shell script in the target (libguestfs chroots into it with
// /dev, /proc and /sys bound, as curtin's ChrootableTarget does) and
// returns its output; a non-zero exit is an error with the output's tail.
func (a target) run(ctx context.Context, what, script string) (string, error) {
	out, code, err := a.Run(ctx, "export DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"+script)
	if err != nil {
		return out, fmt.Errorf("%s: %w", what, err)
	}
	if code != 0 {
		return out, fmt.Errorf("%s: exit status %d:\n%s", what, code, lastLines(out, 20))
	}
	return out, nil
}

func (a target) deploy(ctx context.Context, tgz string, c deployConfig, log func(string)) (*deployed, error) {
	const dev = "/dev/sda"
	// Storage: MAAS's flat layout on UEFI, as curtin's block_meta builds it:
	// GPT, partition 1 a 512 MiB FAT32 ESP mounted at /boot/efi, partition 2
	// ext4 on the rest mounted at /. curtin mounts both before extracting.
	err := a.Call(ctx, func(g *guestfs.Guestfs) error {
		steps := []func() error{
			func() error { return g.Part_init(dev, "gpt") },
			func() error { return g.Part_add(dev, "p", 2048, 2048+espSectors-1) },
			func() error { return g.Part_add(dev, "p", 2048+espSectors, -34) },
			func() error { return g.Part_set_gpt_type(dev, 1, espType) },
			func() error { return g.Part_set_gpt_type(dev, 2, linuxType) },
			func() error { return g.Mkfs("vfat", dev+"1", nil) },
			func() error { return g.Mkfs("ext4", dev+"2", nil) },
			func() error { return g.Mount(dev+"2", "/") },
			func() error { return g.Mkdir_p("/boot/efi") },
			func() error { return g.Mount(dev+"1", "/boot/efi") },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("partitioning the scratch disk: %w", err)
	}

	// Extraction: curtin's `tar -C TARGET --xattrs --xattrs-include=* -Sxpf
	// - --numeric-owner` (extract.extract_root_tgz_url). libguestfs's tar-in
	// runs tar as root (which implies -p and keeps owners) with the same
	// xattr flags but no --numeric-owner, so the stream is decompressed here
	// and its entries' user and group names dropped: tar then uses the
	// numeric ids, which is what --numeric-owner means. Anything under
	// ./boot/efi lands on the FAT ESP, as it does under curtin.
	log("extracting " + tgz + " into the target")
	sum, err := a.tarIn(ctx, tgz)
	if err != nil {
		return nil, err
	}
	dep := &deployed{tgz: sum}

	// A kernel and its initrd: curtin installs linux-generic on Ubuntu
	// when the image has none; the smoke test has no archive to install
	// from, so a tgz without one cannot boot.
	kernels, err := a.kernels(ctx)
	if err != nil {
		return nil, err
	}
	if len(kernels) == 0 {
		return nil, errors.New("the tgz has no kernel: no /boot/vmlinuz-* in it (curtin would try to install linux-generic from the archive; ship the kernel in the image)")
	}
	for _, pkg := range []string{"grub-efi-amd64", "grub-efi-amd64-bin"} {
		if _, err := a.run(ctx, "looking for "+pkg, "dpkg-query -W -f '${Status}' "+pkg+" | grep -q 'install ok installed'"); err != nil {
			return nil, fmt.Errorf("the image lacks %s, which curtin installs from the archive at deploy time (slow, and a failure offline): install it in the image", pkg)
		}
	}

	// fstab: curtin overwrites it with by-uuid lines (block_meta).
	var rootUUID, espUUID string
	err = a.Call(ctx, func(g *guestfs.Guestfs) error {
		var err error
		if rootUUID, err = g.Vfs_uuid(dev + "2"); err != nil {
			return err
		}
		espUUID, err = g.Vfs_uuid(dev + "1")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the filesystems' UUIDs: %w", err)
	}
	if err := a.write(ctx, "/etc/fstab", fstab(rootUUID, espUUID), 0o644); err != nil {
		return nil, err
	}

	// cloud-init: curtin writes MAAS's datasource (95-cloudconfig-*.cfg)
	// and the node's network config (50-curtin-networking.cfg); a NoCloud
	// seed stands in for MAAS's metadata service and deploy user-data (the
	// site bootstrap at stage converged). Then the smoke unit.
	id := make([]byte, 8)
	rand.Read(id)
	files := guestFiles(c.guest, "imagectl-smoke-"+hex.EncodeToString(id))
	for _, f := range files {
		if err := a.write(ctx, f.path, f.content, f.mode); err != nil {
			return nil, err
		}
	}
	if err := a.Call(ctx, func(g *guestfs.Guestfs) error {
		if err := g.Mkdir_p("/etc/systemd/system/multi-user.target.wants"); err != nil {
			return err
		}
		return g.Ln_sf(smokeUnit, "/etc/systemd/system/multi-user.target.wants/imagectl-smoke.service")
	}); err != nil {
		return nil, fmt.Errorf("enabling the smoke unit: %w", err)
	}

	// initramfs: curtin runs update-initramfs once per kernel in /boot,
	// -u when its initrd exists, -c when not (curthooks.update_initramfs);
	// a DKMS module that cannot build fails there as it fails a deploy.
	// -u is optional here (c.initramfs): under TCG it takes many minutes.
	update := ":"
	if c.initramfs {
		update = `update-initramfs -u -k "$k"`
		log("updating the initramfs of kernel " + strings.Join(kernels, ", ") + " as curtin does")
	}
	if out, err := a.run(ctx, "update-initramfs", `set -e
for k in $(ls -1 /boot | sed -n 's/^vmlinu[xz]-//p'); do
	if [ -e "/boot/initrd.img-$k" ]; then
		`+update+`
	else
		echo "creating the missing /boot/initrd.img-$k"
		update-initramfs -c -k "$k"
	fi
done`); err != nil {
		return nil, err
	} else if out != "" {
		log(out)
	}

	// GRUB, as install_grub does for a Debian-family target on UEFI:
	// 50-cloudimg-settings.cfg moved aside (prepare_grub_dir);
	// GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub replaced by the
	// console= carried over plus MAAS's kernel_opts, never touching
	// GRUB_CMDLINE_LINUX; os-prober off and GRUB_TERMINAL appended to
	// 50-curtin-settings.cfg; then dpkg-reconfigure grub-efi-amd64,
	// update-grub and grub-install --target=x86_64-efi
	// --efi-directory=/boot/efi --bootloader-id=<distro> --recheck.
	// Two differences: curtin's `efibootmgr -v` and NVRAM entry need EFI
	// variables, which the appliance lacks, so --no-nvram (curtin's own
	// flag when update_nvram is off) and --force-extra-removable, which also
	// installs the loader at EFI/BOOT/BOOTX64.EFI, the path firmware with
	// empty NVRAM boots; and Ubuntu's grub-multi-install, which curtin
	// prefers when present, runs this same grub-install per ESP.
	grub, err := a.ReadFile(ctx, "/etc/default/grub")
	if err != nil {
		return nil, err
	}
	if err := a.write(ctx, "/etc/default/grub", replaceCmdlineDefault(string(grub), kernelOpts), 0o644); err != nil {
		return nil, err
	}
	log("installing GRUB for UEFI as curtin does")
	if _, err := a.run(ctx, "installing GRUB", `set -e
d=/etc/default/grub.d
mkdir -p $d
if [ -e $d/50-cloudimg-settings.cfg ]; then mv $d/50-cloudimg-settings.cfg $d/50-cloudimg-settings.cfg.disabled; fi
printf '%s\n' `+shell.Quote(curtinGrubSettings)+` >> $d/50-curtin-settings.cfg
. /etc/os-release
dpkg-reconfigure grub-efi-amd64
update-grub
grub-install --target=x86_64-efi --efi-directory=/boot/efi --bootloader-id="${ID:-debian}" --recheck --no-nvram --force-extra-removable`); err != nil {
		return nil, err
	}
	cfg, err := a.ReadFile(ctx, "/boot/grub/grub.cfg")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(cfg), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "linux" {
			dep.kernelLines = append(dep.kernelLines, strings.TrimSpace(l))
		}
	}
	if len(dep.kernelLines) == 0 {
		return nil, errors.New("update-grub wrote a /boot/grub/grub.cfg with no kernel entry")
	}
	log("GRUB boots: " + dep.kernelLines[0])
	if ok, _ := a.Exists(ctx, "/boot/efi/EFI/BOOT/BOOTX64.EFI"); !ok {
		return nil, errors.New("grub-install left no /boot/efi/EFI/BOOT/BOOTX64.EFI")
	}
	return dep, nil
}

// kernels are the versions of the kernels in the target's /boot
// (vmlinuz-VERSION or vmlinux-VERSION), read through the appliance's API
// rather than a shell in the target: a tgz too broken to run one is still
// told what it lacks.
func (a target) kernels(ctx context.Context) ([]string, error) {
	var names []string
	err := a.Call(ctx, func(g *guestfs.Guestfs) error {
		// /boot may be a link to the directory, as ls /boot would follow.
		if ok, err := g.Is_dir("/boot", &guestfs.OptargsIs_dir{Followsymlinks_is_set: true, Followsymlinks: true}); err != nil || !ok {
			return err
		}
		var err error
		names, err = g.Ls("/boot")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("looking for a kernel in /boot: %w", err)
	}
	var versions []string
	for _, n := range names {
		v, ok := strings.CutPrefix(n, "vmlinuz-")
		if !ok {
			v, ok = strings.CutPrefix(n, "vmlinux-")
		}
		if ok && v != "" {
			versions = append(versions, v)
		}
	}
	return versions, nil
}

// write writes a file into the target with Unix permission bits.
func (a target) write(ctx context.Context, p, content string, mode int) error {
	return a.WriteFile(ctx, p, []byte(content), fsmode.FromUnix(uint32(mode)))
}

// tarIn streams the tgz into the target's / through tar-in with xattrs,
// hashing the file as it goes, and returns its digest. Nothing touches the
// disk: the tar stream goes through a pipe.
func (a target) tarIn(ctx context.Context, tgz string) (digest.Digest, error) {
	pr, pw := io.Pipe()
	type result struct {
		sum digest.Digest
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := numericTar(tgz, pw)
		pw.CloseWithError(err)
		done <- result{sum, err}
	}()
	err := a.TarIn(ctx, pr, "/")
	pr.Close() // stops the writer if tar stopped reading
	res := <-done
	if res.err != nil && !errors.Is(res.err, io.ErrClosedPipe) {
		return digest.Digest{}, fmt.Errorf("reading %s: %w", tgz, res.err)
	}
	if err != nil {
		return digest.Digest{}, fmt.Errorf("extracting %s: %w", tgz, err)
	}
	return res.sum, nil
}

// numericTar writes the tgz's tar stream to w with user and group names
// dropped, and returns the tgz's digest.
func numericTar(tgz string, w io.Writer) (digest.Digest, error) {
	f, err := readlimit.Open(tgz)
	if err != nil {
		return digest.Digest{}, err
	}
	defer f.Close()
	h := digest.NewWriter(nil)
	src := io.TeeReader(f, h)
	zr, err := pgzip.NewReader(src)
	if err != nil {
		return digest.Digest{}, fmt.Errorf("not a gzip stream (curtin reads gzip, bzip2, xz): %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return digest.Digest{}, err
		}
		hdr.Uname, hdr.Gname = "", ""
		if hdr.Typeflag == tar.TypeGNUSparse {
			hdr.Typeflag = tar.TypeReg // the reader expands holes
		}
		hdr.Format = tar.FormatUnknown
		if err := tw.WriteHeader(hdr); err != nil {
			return digest.Digest{}, fmt.Errorf("entry %s: %w", hdr.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return digest.Digest{}, fmt.Errorf("entry %s: %w", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return digest.Digest{}, err
	}
	// The rest of the gzip stream (its checksum) and of the file.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return digest.Digest{}, err
	}
	if _, err := io.Copy(io.Discard, src); err != nil {
		return digest.Digest{}, err
	}
	return h.Digest(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

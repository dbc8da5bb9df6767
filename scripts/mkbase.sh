#!/bin/bash
# mkbase.sh - build a small Debian cloud-style disk image (GPT, ESP=p15, ext4 root=p1, UEFI GRUB via shim)
# without loop devices, without mounting anything on the host and without booting a VM.
#
# usage: mkbase.sh [OUTPUT.qcow2]            (default: ./debian-bookworm-base.qcow2)
# env:   SUITE=bookworm  SIZE=2G  ESP_MIB=100  KERNEL=linux-image-amd64  EXTRA_PACKAGES="a,b"
#        MIRROR=<file|url>   (default: the host's /etc/apt/sources.list.d/debian.sources if present)
#        SOURCE_DATE_EPOCH=<int> (default 1700000000; fixes UUIDs, timestamps, mmdebstrap output)
#        KEEP_WORK=1 keeps the work dir; WORKDIR=/var/tmp (parent of the temp work dir)
# needs (Debian): mmdebstrap e2fsprogs dosfstools mtools gdisk qemu-utils faketime; run as root
# (mmdebstrap --mode=root; for non-root use --mode=unshare + subuids and a tar->dir step).
# mmdebstrap runs its hooks in its own shell with $1 = the chroot: the single
# quotes around them are intended.
# shellcheck disable=SC2016
set -euo pipefail

OUT=${1:-$PWD/debian-bookworm-base.qcow2}
SUITE=${SUITE:-bookworm}
SIZE=${SIZE:-2G}
ESP_MIB=${ESP_MIB:-100}
KERNEL=${KERNEL:-linux-image-amd64}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000}
if [ -z "${MIRROR:-}" ] && [ -f /etc/apt/sources.list.d/debian.sources ]; then
    MIRROR=/etc/apt/sources.list.d/debian.sources
fi

PKGS="$KERNEL,systemd,systemd-sysv,systemd-resolved,udev,dbus,cloud-init,cloud-guest-utils"
PKGS="$PKGS,grub-efi-amd64,grub-efi-amd64-signed,shim-signed,openssh-server,netplan.io"
PKGS="$PKGS,apt,ca-certificates,initramfs-tools,zstd,e2fsprogs,dosfstools,iproute2,sudo,less"
[ -n "${EXTRA_PACKAGES:-}" ] && PKGS="$PKGS,$EXTRA_PACKAGES"

# Deterministic identifiers derived from SOURCE_DATE_EPOCH (override with ROOT_UUID etc.).
h=$(printf 'mkbase-%s' "$SOURCE_DATE_EPOCH" | sha256sum | cut -c1-64)
uuid() { local s=${h:$1:32}; echo "${s:0:8}-${s:8:4}-4${s:13:3}-8${s:17:3}-${s:20:12}"; }
ROOT_UUID=${ROOT_UUID:-$(uuid 0)}
DISK_GUID=${DISK_GUID:-$(uuid 8)}
P1_GUID=${P1_GUID:-$(uuid 16)}
P15_GUID=${P15_GUID:-$(uuid 24)}
ESP_ID=${ESP_ID:-$(echo "${h:32:8}" | tr a-f A-F)}          # vfat volume id, shows as XXXX-XXXX (do NOT add mkfs.fat --invariant: it overrides -i with 1234-ABCD)
ESP_UUID="${ESP_ID:0:4}-${ESP_ID:4:4}"

WORK=$(mktemp -d "${WORKDIR:-/var/tmp}/mkbase.XXXXXX")
cleanup() { [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT
ROOT=$WORK/rootfs
t0=$(date +%s)
log() { echo "mkbase: [$(( $(date +%s) - t0 ))s] $*" >&2; }

# ---------------------------------------------------------------- 1. root filesystem tree
log "mmdebstrap $SUITE -> $ROOT"
# Hooks run on the host with $1 = chroot dir; /dev,/proc,/sys are bind-mounted by mmdebstrap itself.
# initramfs-tools' fsck hook probes the (absent) root device in a chroot: FSTYPE=ext4 makes it include e2fsck.
mmdebstrap --mode=root --variant=minbase --include="$PKGS" \
    --aptopt='Acquire::Retries "3"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --customize-hook='echo debian > "$1/etc/hostname"' \
    --customize-hook='printf "127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n" > "$1/etc/hosts"' \
    --essential-hook="printf 'UUID=$ROOT_UUID\t/\text4\trw,discard,errors=remount-ro\t0 1\nUUID=$ESP_UUID\t/boot/efi\tvfat\tumask=0077\t0 1\n' > \"\$1/etc/fstab\"" \
    --essential-hook='mkdir -p "$1/boot/efi" "$1/etc/default/grub.d"' \
    --essential-hook='printf "GRUB_TIMEOUT=1\nGRUB_CMDLINE_LINUX_DEFAULT=\"console=tty0 console=ttyS0,115200\"\nGRUB_TERMINAL=\"console serial\"\nGRUB_DISABLE_OS_PROBER=true\n" > "$1/etc/default/grub.d/50-cloudimg.cfg"' \
    --essential-hook='mkdir -p "$1/etc/cloud/cloud.cfg.d" && printf "locale: C.UTF-8\n" > "$1/etc/cloud/cloud.cfg.d/01_mkbase.cfg" && printf "LANG=C.UTF-8\n" > "$1/etc/default/locale"' \
    --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
    --customize-hook=': > "$1/etc/machine-id"; rm -f "$1/var/lib/dbus/machine-id"' \
    --essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" && echo FSTYPE=ext4 > "$1/etc/initramfs-tools/conf.d/mkbase-fstype"' \
    --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/.resolv.conf.systemd-resolved.bak"; ln -s ../run/systemd/resolve/stub-resolv.conf "$1/etc/resolv.conf"' \
    --customize-hook='rm -rf "$1"/var/log/*.log "$1"/var/log/apt/* "$1"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old' \
    "$SUITE" "$ROOT" ${MIRROR:+"$MIRROR"}

KVER=$(find "$ROOT/boot" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sed -n 's/^vmlinuz-//p' | sort -V | tail -1)
[ -n "$KVER" ] || { echo "no kernel in $ROOT/boot" >&2; exit 1; }
lsinitramfs "$ROOT/boot/initrd.img-$KVER" | grep -q "sbin/e2fsck$" || log "WARNING: initramfs has no e2fsck"

# Static grub.cfg (grub-mkconfig cannot probe the target disk from a chroot); uses the /vmlinuz and
# /initrd.img symlinks so it keeps working after kernel upgrades. update-grub inside the guest (e.g.
# through libguestfs) replaces it with a generated one.
cat > "$ROOT/boot/grub/grub.cfg" <<EOF
# written by mkbase.sh; regenerate with update-grub
set timeout=1
serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
insmod part_gpt
insmod ext2
search --no-floppy --fs-uuid --set=root $ROOT_UUID
menuentry 'Debian GNU/Linux' {
    search --no-floppy --fs-uuid --set=root $ROOT_UUID
    linux /vmlinuz root=UUID=$ROOT_UUID ro console=tty0 console=ttyS0,115200
    initrd /initrd.img
}
EOF

# mmdebstrap only clamps mtimes for tarball output: clamp the directory tree like tar --clamp-mtime
find "$ROOT" -xdev -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch -h -d "@$SOURCE_DATE_EPOCH"

# ---------------------------------------------------------------- 2. ESP tree (what grub-install
# --target=x86_64-efi --uefi-secure-boot --force-extra-removable --no-nvram would write)
ESPT=$WORK/esp
mkdir -p "$ESPT/EFI/BOOT" "$ESPT/EFI/debian"
cp "$ROOT/usr/lib/shim/shimx64.efi.signed"                 "$ESPT/EFI/BOOT/BOOTX64.EFI"
cp "$ROOT/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed" "$ESPT/EFI/BOOT/grubx64.efi"
cp "$ROOT/usr/lib/shim/mmx64.efi.signed"                   "$ESPT/EFI/BOOT/mmx64.efi"
cp "$ESPT/EFI/BOOT/BOOTX64.EFI" "$ESPT/EFI/debian/shimx64.efi"
cp "$ESPT/EFI/BOOT/grubx64.efi" "$ESPT/EFI/debian/grubx64.efi"
cp "$ESPT/EFI/BOOT/mmx64.efi"   "$ESPT/EFI/debian/mmx64.efi"
printf 'shimx64.efi,debian,,This is the boot entry for debian\n' | iconv -t UTF-16 > "$ESPT/EFI/debian/BOOTX64.CSV"
# signed grub's prefix is (esp)/EFI/debian; it sources grub.cfg there (falls back to $cmdpath/grub.cfg)
printf "search.fs_uuid %s root\nset prefix=(\$root)'/boot/grub'\nconfigfile \$prefix/grub.cfg\n" "$ROOT_UUID" \
    | tee "$ESPT/EFI/debian/grub.cfg" > "$ESPT/EFI/BOOT/grub.cfg"
find "$ESPT" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

# ---------------------------------------------------------------- 3. GPT layout (Debian/Ubuntu cloud:
# p15 ESP first on disk, p1 root last so growpart/cloud-init can grow it)
RAW=$WORK/disk.raw
truncate -s "$SIZE" "$RAW"
sgdisk -Z -U "$DISK_GUID" \
    -n "15:2048:+${ESP_MIB}M" -t 15:ef00 -c 15:UEFI -u 15:"$P15_GUID" \
    -n 1:0:0 -t 1:8304 -c 1:cloudimg-rootfs -u 1:"$P1_GUID" \
    "$RAW" >/dev/null
part() { sgdisk -i "$1" "$RAW" | awk -v k="$2" '$0 ~ k {print $3}'; }
P15_START=$(part 15 'First sector'); P15_END=$(part 15 'Last sector')
P1_START=$(part 1 'First sector');   P1_END=$(part 1 'Last sector')

# ---------------------------------------------------------------- 4. filesystems as plain files
log "mkfs.vfat ESP ($ESP_MIB MiB, id $ESP_UUID)"
ESP_IMG=$WORK/esp.img
ESP_SECTORS=$(( P15_END - P15_START + 1 ))
rm -f "$ESP_IMG"
TZ=UTC faketime "@$SOURCE_DATE_EPOCH" mkfs.vfat -C -F 32 -s 1 -S 512 -n UEFI -i "$ESP_ID" "$ESP_IMG" $(( ESP_SECTORS / 2 )) >/dev/null
# not under faketime: libfaketime also shifts stat() mtimes, which mcopy -m copies; mtools honours SOURCE_DATE_EPOCH
TZ=UTC mcopy -s -m -Q -i "$ESP_IMG" "$ESPT/EFI" ::/

log "mkfs.ext4 -d root (uuid $ROOT_UUID)"
ROOT_IMG=$WORK/root.img
ROOT_BYTES=$(( (P1_END - P1_START + 1) * 512 ))
truncate -s "$ROOT_BYTES" "$ROOT_IMG"
E2FSPROGS_FAKE_TIME=$SOURCE_DATE_EPOCH mkfs.ext4 -q -F -L cloudimg-rootfs -U "$ROOT_UUID" \
    -E hash_seed="$ROOT_UUID",lazy_itable_init=0 -d "$ROOT" "$ROOT_IMG"
# mkfs.ext4 -d copies st_ctime/st_atime (= install/read time) and stamps crtime=now: pin them for reproducibility
if [ "${PIN_TIMES:-1}" = 1 ]; then
    ( cd "$ROOT" && find . -xdev -printf '%P\n' ) | LC_ALL=C sort | \
        awk -v t="@$SOURCE_DATE_EPOCH" '{p="/"$0; gsub(/"/,"\\\"",p); printf "sif \"%s\" ctime %s\nsif \"%s\" crtime %s\nsif \"%s\" atime %s\n", p, t, p, t, p, t}
             END {printf "sif / ctime %s\nsif / crtime %s\nsif /lost+found ctime %s\nsif /lost+found crtime %s\n", t, t, t, t}' > "$WORK/pin.debugfs"
    E2FSPROGS_FAKE_TIME=$SOURCE_DATE_EPOCH debugfs -w -f "$WORK/pin.debugfs" "$ROOT_IMG" >/dev/null 2>"$WORK/pin.err" || true
    grep -v '^debugfs' "$WORK/pin.err" | head -5 >&2 || true
fi
e2fsck -fn "$ROOT_IMG" >/dev/null

# ---------------------------------------------------------------- 5. assemble + convert
dd if="$ESP_IMG"  of="$RAW" bs=512 seek="$P15_START" conv=notrunc,sparse status=none
dd if="$ROOT_IMG" of="$RAW" bs=1M  seek="$(( P1_START * 512 ))" oflag=seek_bytes conv=notrunc,sparse status=none
log "qemu-img convert -c -> $OUT"
qemu-img convert -c -O qcow2 "$RAW" "$OUT"
log "done: kernel $KVER, root UUID $ROOT_UUID, ESP $ESP_UUID, $(du -h "$OUT" | cut -f1) on disk, virtual $SIZE"

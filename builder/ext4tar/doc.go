// Package ext4tar reads an ext4 root filesystem straight from a raw disk
// image on the host, after the appliance has shut down, and streams its
// entries as tar headers and file contents (or the headers alone) in a
// fixed order. Its feature probe (ProbeFeatures) may run before, while the
// appliance still has the filesystem mounted.
//
// It owns the decision whether that is safe. go-diskfs (v1.9.4) lists
// directories, decodes inodes and returns xattr values correctly, so it is
// used for those; everything it gets wrong or cannot say is this package's
// own code, measured against the appliance's tar-out (docs/host-side-packing.md):
// the superblock, feature and journal checks, a raw inode reader for
// permission bits, flags and the xattr scan, an extent walker that reads
// every regular file (holes and unwritten extents read as zeros), the ACL
// conversion from ext4's on-disk format to the xattr format tar stores, and
// empty xattr values. Anything outside what was measured is refused with an
// *UnsupportedError, and the caller packs through the appliance instead.
package ext4tar

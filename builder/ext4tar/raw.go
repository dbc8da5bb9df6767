package ext4tar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// On-disk constants from the kernel's fs/ext4/ext4.h and fs/jbd2.
const (
	superblockOffset = 1024
	ext4Magic        = 0xEF53

	compatHasJournal = 0x4

	incompatCompression = 0x1
	incompatFiletype    = 0x2
	incompatRecover     = 0x4
	incompatJournalDev  = 0x8
	incompatMetaBG      = 0x10
	incompatExtents     = 0x40
	incompat64bit       = 0x80
	incompatMMP         = 0x100
	incompatFlexBG      = 0x200
	incompatEAInode     = 0x400
	incompatDirData     = 0x1000
	incompatCsumSeed    = 0x2000
	incompatLargeDir    = 0x4000
	incompatInlineData  = 0x8000
	incompatEncrypt     = 0x10000
	incompatCasefold    = 0x20000

	roHugeFile      = 0x8
	roHasSnapshot   = 0x80
	roBigalloc      = 0x200
	roMetadataCsum  = 0x400
	roReplica       = 0x800
	roVerity        = 0x8000
	roOrphanPresent = 0x10000
	roKnown         = 0x1ffff

	inoFlagCompr    = 0x4
	inoFlagEncrypt  = 0x800
	inoFlagHugeFile = 0x40000
	inoFlagExtents  = 0x80000
	inoFlagVerity   = 0x100000
	inoFlagEAInode  = 0x200000
	inoFlagInline   = 0x10000000
	inoFlagCasefold = 0x40000000

	xattrMagic       = 0xEA020000
	extentMagic      = 0xF30A
	maxInitExtentLen = 32768
	jbd2Magic        = 0xC03B3998

	sIFMT   = 0xF000
	sIFSOCK = 0xC000
	sIFLNK  = 0xA000
	sIFREG  = 0x8000
	sIFBLK  = 0x6000
	sIFDIR  = 0x4000
	sIFCHR  = 0x2000
	sIFIFO  = 0x1000
)

// rawFS is the part of an ext4 filesystem this package reads itself.
type rawFS struct {
	r              io.ReaderAt // the filesystem, offset 0 = its first byte
	blockSize      uint64
	inodeSize      uint32
	inodesPerGroup uint32
	groups         uint64
	inodeTables    []uint64
	compat         uint32
	incompat       uint32
	rocompat       uint32
	state          uint16
	lastOrphan     uint32
	journalInum    uint32
}

func openRaw(r io.ReaderAt) (*rawFS, error) {
	sb := make([]byte, 1024)
	if _, err := r.ReadAt(sb, superblockOffset); err != nil {
		return nil, fmt.Errorf("reading the superblock: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint16(sb[0x38:]) != ext4Magic {
		return nil, &UnsupportedError{Reasons: []string{"not an ext2/3/4 filesystem (no superblock magic)"}}
	}
	f := &rawFS{r: r}
	logBlock := le.Uint32(sb[0x18:])
	if logBlock > 6 {
		return nil, fmt.Errorf("superblock: block size 1024<<%d is not valid", logBlock)
	}
	f.blockSize = 1024 << logBlock
	f.inodesPerGroup = le.Uint32(sb[0x28:])
	f.state = le.Uint16(sb[0x3A:])
	f.inodeSize = 128
	if le.Uint32(sb[0x4C:]) >= 1 {
		f.inodeSize = uint32(le.Uint16(sb[0x58:]))
	}
	f.compat = le.Uint32(sb[0x5C:])
	f.incompat = le.Uint32(sb[0x60:])
	f.rocompat = le.Uint32(sb[0x64:])
	f.journalInum = le.Uint32(sb[0xE0:])
	f.lastOrphan = le.Uint32(sb[0xE8:])
	descSize := uint64(32)
	if f.incompat&incompat64bit != 0 {
		descSize = uint64(le.Uint16(sb[0xFE:]))
	}
	blocks := uint64(le.Uint32(sb[0x4:]))
	if f.incompat&incompat64bit != 0 {
		blocks |= uint64(le.Uint32(sb[0x150:])) << 32
	}
	first := uint64(le.Uint32(sb[0x14:]))
	bpg := uint64(le.Uint32(sb[0x20:]))
	if bpg == 0 || f.inodesPerGroup == 0 || descSize < 32 || f.inodeSize < 128 || blocks <= first {
		return nil, errors.New("superblock: inconsistent geometry")
	}
	f.groups = (blocks - first + bpg - 1) / bpg
	if f.groups > 1<<24 {
		return nil, fmt.Errorf("superblock: %d block groups is implausible", f.groups)
	}
	gdt := make([]byte, f.groups*descSize)
	if _, err := r.ReadAt(gdt, int64((first+1)*f.blockSize)); err != nil {
		return nil, fmt.Errorf("reading the group descriptors: %w", err)
	}
	f.inodeTables = make([]uint64, f.groups)
	for g := range f.groups {
		d := gdt[g*descSize:]
		t := uint64(le.Uint32(d[0x8:]))
		if descSize >= 64 {
			t |= uint64(le.Uint32(d[0x28:])) << 32
		}
		f.inodeTables[g] = t
	}
	return f, nil
}

// problems lists the filesystem-wide reasons not to read it on the host:
// state the kernel would repair first (journal, orphans, errors) and
// features go-diskfs or this package do not read correctly.
func (f *rawFS) problems() []string {
	var p []string
	if f.state&1 == 0 {
		p = append(p, "the filesystem was not cleanly unmounted")
	}
	if f.state&2 != 0 {
		p = append(p, "the superblock records filesystem errors")
	}
	if f.incompat&incompatRecover != 0 {
		p = append(p, "the journal needs recovery")
	}
	if f.lastOrphan != 0 || f.rocompat&roOrphanPresent != 0 {
		p = append(p, "orphaned inodes are waiting to be processed")
	}
	p = append(p, f.featureProblems()...)
	if f.compat&compatHasJournal != 0 && f.journalInum != 0 {
		// s_state alone misses a journal that still holds transactions.
		if dirty, err := f.journalDirty(); err != nil {
			p = append(p, "the journal superblock cannot be read: "+err.Error())
		} else if dirty {
			p = append(p, "the journal holds transactions not yet written back")
		}
	}
	return p
}

// featureProblems lists the reasons not to read the filesystem on the host
// that its features and geometry give: none of them is one a mount sets
// for a while (needs_recovery and orphan_present are state, checked by
// problems), so they hold while it is still mounted. A feature added while
// mounted (an online resize's meta_bg) is caught by Open.
func (f *rawFS) featureProblems() []string {
	var p []string
	if f.inodeSize < 160 {
		p = append(p, fmt.Sprintf("%d-byte inodes (at least 160 needed)", f.inodeSize))
	}
	if f.rocompat&roMetadataCsum == 0 {
		p = append(p, "no metadata_csum feature")
	}
	if f.incompat&incompatExtents == 0 {
		p = append(p, "no extents feature")
	}
	for _, x := range []struct {
		bit  uint32
		name string
	}{
		{incompatCompression, "compression"}, {incompatJournalDev, "journal_dev"}, {incompatMetaBG, "meta_bg"},
		{incompatDirData, "dirdata"}, {incompatInlineData, "inline_data"}, {incompatEncrypt, "encrypt"},
		{incompatCasefold, "casefold"}, {incompatEAInode, "ea_inode"},
	} {
		if f.incompat&x.bit != 0 {
			p = append(p, "the "+x.name+" feature")
		}
	}
	const known = incompatCompression | incompatFiletype | incompatRecover | incompatJournalDev | incompatMetaBG |
		incompatExtents | incompat64bit | incompatMMP | incompatFlexBG | incompatEAInode | incompatDirData |
		incompatCsumSeed | incompatLargeDir | incompatInlineData | incompatEncrypt | incompatCasefold
	if u := f.incompat &^ known; u != 0 {
		p = append(p, fmt.Sprintf("unknown incompatible features %#x", u))
	}
	for _, x := range []struct {
		bit  uint32
		name string
	}{{roHasSnapshot, "snapshot"}, {roBigalloc, "bigalloc"}, {roReplica, "replica"}, {roVerity, "verity"}} {
		if f.rocompat&x.bit != 0 {
			p = append(p, "the "+x.name+" feature")
		}
	}
	if u := f.rocompat &^ roKnown; u != 0 {
		p = append(p, fmt.Sprintf("unknown read-only features %#x", u))
	}
	return p
}

type rawInode struct {
	b          []byte
	mode       uint16
	flags      uint32
	size       uint64
	extraIsize uint16
	fileACL    uint64
	blocks512  uint64 // i_blocks in 512-byte units
}

func (f *rawFS) inode(ino uint32) (*rawInode, error) {
	if ino == 0 {
		return nil, errors.New("inode 0")
	}
	g := uint64(ino-1) / uint64(f.inodesPerGroup)
	idx := uint64(ino-1) % uint64(f.inodesPerGroup)
	if g >= f.groups {
		return nil, fmt.Errorf("inode %d is beyond the last block group", ino)
	}
	b := make([]byte, f.inodeSize)
	if _, err := f.r.ReadAt(b, int64(f.inodeTables[g]*f.blockSize+idx*uint64(f.inodeSize))); err != nil {
		return nil, fmt.Errorf("reading inode %d: %w", ino, err)
	}
	le := binary.LittleEndian
	ri := &rawInode{b: b}
	ri.mode = le.Uint16(b[0:])
	ri.flags = le.Uint32(b[0x20:])
	ri.size = uint64(le.Uint32(b[0x4:])) | uint64(le.Uint32(b[0x6C:]))<<32
	ri.fileACL = uint64(le.Uint32(b[0x68:])) | uint64(le.Uint16(b[0x76:]))<<32
	bl := uint64(le.Uint32(b[0x1C:]))
	if f.rocompat&roHugeFile != 0 {
		bl |= uint64(le.Uint16(b[0x74:])) << 32
		if ri.flags&inoFlagHugeFile != 0 {
			bl *= f.blockSize / 512
		}
	}
	ri.blocks512 = bl
	if f.inodeSize > 128 {
		ri.extraIsize = le.Uint16(b[0x80:])
	}
	return ri, nil
}

type extent struct {
	lblk, len, pblk uint64
	unwritten       bool
}

// extents walks an inode's whole extent tree, in logical order.
func (f *rawFS) extents(ri *rawInode) ([]extent, error) {
	var out []extent
	le := binary.LittleEndian
	var walk func(node []byte, want, level int) error
	walk = func(node []byte, want, level int) error {
		if level > 5 {
			return errors.New("extent tree deeper than 5 levels")
		}
		if len(node) < 12 || le.Uint16(node) != extentMagic {
			return errors.New("bad extent header")
		}
		n := int(le.Uint16(node[2:]))
		depth := int(le.Uint16(node[6:]))
		if want >= 0 && depth != want {
			return fmt.Errorf("extent node at depth %d, expected %d", depth, want)
		}
		if 12+n*12 > len(node) {
			return errors.New("extent entries overflow their node")
		}
		for i := range n {
			e := node[12+i*12:]
			if depth == 0 {
				l := uint64(le.Uint16(e[4:]))
				unw := l > maxInitExtentLen
				if unw {
					l -= maxInitExtentLen
				}
				out = append(out, extent{lblk: uint64(le.Uint32(e[0:])), len: l,
					pblk: uint64(le.Uint32(e[8:])) | uint64(le.Uint16(e[6:]))<<32, unwritten: unw})
				continue
			}
			child := uint64(le.Uint32(e[4:])) | uint64(le.Uint16(e[8:]))<<32
			blk := make([]byte, f.blockSize)
			if _, err := f.r.ReadAt(blk, int64(child*f.blockSize)); err != nil {
				return err
			}
			if err := walk(blk, depth-1, level+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(ri.b[0x28:0x64], -1, 0); err != nil {
		return nil, err
	}
	for i := 1; i < len(out); i++ {
		if out[i].lblk < out[i-1].lblk+out[i-1].len {
			return nil, errors.New("overlapping or unsorted extents")
		}
	}
	return out, nil
}

// fastSymlink reports whether a symlink's target lives in i_block (the
// kernel's ext4_inode_is_fast_symlink: no data blocks besides an EA block).
func (f *rawFS) fastSymlink(ri *rawInode) bool {
	ea := uint64(0)
	if ri.fileACL != 0 {
		ea = f.blockSize / 512
	}
	return ri.blocks512 == ea
}

// unsupported says why go-diskfs or this package would misread the inode,
// or "" when they read it correctly. Holes and unwritten extents in regular
// files are fine: their data is read by fileReader, not by go-diskfs.
func (f *rawFS) unsupported(ri *rawInode) string {
	if ri.flags&inoFlagInline != 0 {
		return "inline data"
	}
	if x := ri.flags & (inoFlagEncrypt | inoFlagCasefold | inoFlagCompr | inoFlagVerity | inoFlagEAInode); x != 0 {
		return fmt.Sprintf("inode flags %#x (encrypted, casefolded, compressed, verity or EA inode)", x)
	}
	if f.inodeSize > 128 && ri.extraIsize < 16 {
		return "no room for nanosecond timestamps (i_extra_isize < 16)"
	}
	ft := ri.mode & sIFMT
	switch ft {
	case sIFLNK:
		fast := f.fastSymlink(ri)
		switch {
		case ri.size < 60 && fast:
			return ""
		case ri.size < 60:
			// go-diskfs reads any target under 60 bytes from i_block.
			return "a short symlink stored in a data block"
		case fast:
			return "a long symlink without data blocks"
		}
	case sIFREG, sIFDIR:
	default:
		return ""
	}
	if ri.flags&inoFlagExtents == 0 {
		if ft == sIFREG && ri.size == 0 {
			return ""
		}
		return "block-mapped (not extent-mapped) data"
	}
	if ft == sIFREG {
		return ""
	}
	// Directories and slow symlinks are read by go-diskfs, which ignores
	// holes and unwritten extents: they must be fully covered.
	ex, err := f.extents(ri)
	if err != nil {
		return "extent tree: " + err.Error()
	}
	need := (ri.size + f.blockSize - 1) / f.blockSize
	var next uint64
	for _, e := range ex {
		if e.lblk >= need {
			break
		}
		if e.lblk != next || e.unwritten {
			return "a hole or unwritten extent"
		}
		next = e.lblk + e.len
	}
	if next < need {
		return "a hole or unwritten extent"
	}
	return ""
}

type xattrEntry struct {
	index    uint8
	name     string
	size     uint32
	valInode uint32
}

// xattrScan lists an inode's xattr entries (in-inode, then its EA block)
// without going through go-diskfs: which inodes need GetXattr at all, and
// which entries it drops (empty values) or cannot read (values in inodes).
func (f *rawFS) xattrScan(ri *rawInode) ([]xattrEntry, error) {
	var out []xattrEntry
	le := binary.LittleEndian
	parse := func(entries []byte) error {
		pos := 0
		for pos+16 <= len(entries) {
			if le.Uint32(entries[pos:]) == 0 {
				return nil
			}
			nl, ni := entries[pos], entries[pos+1]
			if pos+16+int(nl) > len(entries) {
				return errors.New("xattr name overflows its entry table")
			}
			out = append(out, xattrEntry{index: ni, name: string(entries[pos+16 : pos+16+int(nl)]),
				size: le.Uint32(entries[pos+8:]), valInode: le.Uint32(entries[pos+4:])})
			pos = (pos + 16 + int(nl) + 3) &^ 3
		}
		return nil
	}
	if f.inodeSize > 128 {
		start := 128 + int(ri.extraIsize)
		if start+4 <= int(f.inodeSize) && le.Uint32(ri.b[start:]) == xattrMagic {
			if err := parse(ri.b[start+4:]); err != nil {
				return nil, err
			}
		}
	}
	if ri.fileACL != 0 {
		blk := make([]byte, f.blockSize)
		if _, err := f.r.ReadAt(blk, int64(ri.fileACL*f.blockSize)); err != nil {
			return nil, err
		}
		if le.Uint32(blk) != xattrMagic {
			return nil, errors.New("bad xattr block header")
		}
		if err := parse(blk[32:]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// journalDirty reads the internal journal's jbd2 superblock (big-endian):
// a non-zero s_start means transactions wait to be replayed.
func (f *rawFS) journalDirty() (bool, error) {
	ri, err := f.inode(f.journalInum)
	if err != nil {
		return false, err
	}
	if ri.flags&inoFlagExtents == 0 {
		return false, errors.New("the journal inode is not extent-mapped")
	}
	ex, err := f.extents(ri)
	if err != nil {
		return false, err
	}
	if len(ex) == 0 || ex[0].lblk != 0 {
		return false, errors.New("the journal has no first block")
	}
	jsb := make([]byte, 1024)
	if _, err := f.r.ReadAt(jsb, int64(ex[0].pblk*f.blockSize)); err != nil {
		return false, err
	}
	be := binary.BigEndian
	if be.Uint32(jsb) != jbd2Magic {
		return false, errors.New("bad jbd2 magic")
	}
	return be.Uint32(jsb[0x1C:]) != 0, nil
}

// UnsupportedError says why a filesystem cannot be read on the host; the
// caller packs it through the appliance instead.
type UnsupportedError struct {
	// Path is the entry that was refused, "" for the whole filesystem.
	Path    string
	Reasons []string
}

func (e *UnsupportedError) Error() string {
	what := "the filesystem"
	if e.Path != "" {
		what = e.Path
	}
	return "cannot read " + what + " on the host: " + strings.Join(e.Reasons, "; ")
}

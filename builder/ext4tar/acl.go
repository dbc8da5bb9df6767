package ext4tar

import (
	"encoding/binary"
	"fmt"
)

// POSIX ACL tags (include/uapi/linux/posix_acl.h).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
)

// aclToXattr converts an ACL as ext4 stores it on disk (fs/ext4/acl.h:
// version 1, 4-byte entries for the owner/group/mask/other tags and 8-byte
// ones with an id for named users and groups) to the format getxattr(2)
// returns and tar stores (posix_acl_xattr.h: version 2, every entry 8 bytes,
// id -1 where there is none). go-diskfs returns the on-disk form.
func aclToXattr(v []byte) ([]byte, error) {
	le := binary.LittleEndian
	if len(v) < 4 {
		return nil, fmt.Errorf("ACL of %d bytes is too short", len(v))
	}
	switch le.Uint32(v) {
	case 2:
		return v, nil
	case 1:
	default:
		return nil, fmt.Errorf("unknown ACL version %d", le.Uint32(v))
	}
	out := make([]byte, 4, 4+2*len(v))
	le.PutUint32(out, 2)
	for p := 4; p < len(v); {
		if p+4 > len(v) {
			return nil, fmt.Errorf("truncated ACL entry at byte %d", p)
		}
		tag, perm := le.Uint16(v[p:]), le.Uint16(v[p+2:])
		id := uint32(0xFFFFFFFF)
		switch tag {
		case aclUser, aclGroup:
			if p+8 > len(v) {
				return nil, fmt.Errorf("truncated ACL entry at byte %d", p)
			}
			id = le.Uint32(v[p+4:])
			p += 8
		case aclUserObj, aclGroupObj, aclMask, aclOther:
			p += 4
		default:
			return nil, fmt.Errorf("unknown ACL tag %#x", tag)
		}
		out = le.AppendUint16(out, tag)
		out = le.AppendUint16(out, perm)
		out = le.AppendUint32(out, id)
	}
	return out, nil
}

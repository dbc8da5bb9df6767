package smoke

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// SSH is where a smoke VM answers ssh while Options.WhileUp runs: QEMU's
// user network forwards Host:Port to the guest's port 22, and User holds
// Options.AuthorizedKeys with passwordless sudo.
type SSH struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	User string `json:"user"`
}

// Address is host:port.
func (s SSH) Address() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// DefaultSSHUser is the login the first boot creates for the authorized
// keys: the one MAAS's Ubuntu deploys give (runbook 001).
const DefaultSSHUser = "ubuntu"

// guestLogin is the user the NoCloud seed creates, as MAAS's deploy
// user-data does for the node's owner: the keys authorized, sudo without a
// password.
type guestLogin struct {
	user string
	keys []string
}

// userRE is the user names useradd accepts everywhere (Debian's
// NAME_REGEX, without the trailing $ for Samba machines).
var userRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// checkLogin refuses a user name useradd would refuse and a key that is
// not one line of an OpenSSH public key (a line break in it would add a
// line to authorized_keys).
func checkLogin(user string, keys []string) error {
	if !userRE.MatchString(user) {
		return fmt.Errorf("ssh user %q: not a user name (lower-case letters, digits, _ and -, at most 32, not starting with a digit or -)", user)
	}
	for i, k := range keys {
		if err := checkPublicKey(k); err != nil {
			return fmt.Errorf("authorized key %d: %w", i+1, err)
		}
	}
	return nil
}

// checkPublicKey accepts one OpenSSH public key line: TYPE BASE64
// [COMMENT], the blob's own type matching TYPE.
func checkPublicKey(k string) error {
	if strings.IndexFunc(k, unicode.IsControl) >= 0 {
		return errors.New("not one line of printable text (an OpenSSH public key, as in a .pub file)")
	}
	f := strings.Fields(k)
	if len(f) < 2 {
		return errors.New("not an OpenSSH public key: want TYPE BASE64 [COMMENT], as in a .pub file")
	}
	blob, err := base64.StdEncoding.DecodeString(f[1])
	if err != nil || len(blob) < 4 {
		return fmt.Errorf("%s key: its key data is not base64", f[0])
	}
	n := int(blob[0])<<24 | int(blob[1])<<16 | int(blob[2])<<8 | int(blob[3])
	if n > len(blob)-4 || string(blob[4:4+n]) != f[0] {
		return fmt.Errorf("%s key: its key data is not a %s key", f[0], f[0])
	}
	return nil
}

// maxQMPMessage bounds one message of QEMU's monitor: its greeting and
// replies are a few hundred bytes.
const maxQMPMessage = 64 << 10

// powerDown presses the VM's ACPI power button through QEMU's monitor
// (QMP) on the unix socket sock: the guest shuts down as it would on a
// host's power button.
func powerDown(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("QEMU's monitor: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	br := bufio.NewReaderSize(io.LimitReader(c, 16*maxQMPMessage), maxQMPMessage)
	read := func() (map[string]json.RawMessage, error) {
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return nil, fmt.Errorf("QEMU's monitor: %w", err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				return nil, fmt.Errorf("QEMU's monitor: %w", err)
			}
			if _, event := m["event"]; !event {
				return m, nil
			}
		}
	}
	if _, err := read(); err != nil { // the greeting
		return err
	}
	for _, cmd := range []string{"qmp_capabilities", "system_powerdown"} {
		if _, err := fmt.Fprintf(c, "{\"execute\":%q}\n", cmd); err != nil {
			return fmt.Errorf("QEMU's monitor: %s: %w", cmd, err)
		}
		m, err := read()
		if err != nil {
			return fmt.Errorf("%w (%s)", err, cmd)
		}
		if e, ok := m["error"]; ok {
			return fmt.Errorf("QEMU's monitor refused %s: %s", cmd, e)
		}
	}
	return nil
}

package recipes

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
)

// The syntax checks of recipe values. Each returns "" when the value is
// fine, or a sentence for the diagnostic's detail.

var (
	checksumRE     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	sizeRE         = regexp.MustCompile(`^([0-9]+)\s*([A-Za-z]*)$`)
	packageRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?(=[A-Za-z0-9.+~:-]+|/[a-z0-9.+-]+)?$`)
	unitRE         = regexp.MustCompile(`^[A-Za-z0-9:_.@\\-]+$`)
	ownerRE        = regexp.MustCompile(`^([a-z_][a-z0-9_-]*\$?|[0-9]+)(:([a-z_][a-z0-9_-]*\$?|[0-9]+))?$`)
	modeRE         = regexp.MustCompile(`^0?[0-7]{3,4}$`)
	architectureRE = regexp.MustCompile(`^(amd64|arm64|armhf|i386|ppc64el|s390x|riscv64)/[a-z0-9-]+$`)
	baseImageRE    = regexp.MustCompile(`^(ubuntu|centos|rhel|ol)/[a-z0-9.-]+$`)
)

// sentence is an error's text as a diagnostic's detail: capitalized, with
// a full stop.
func sentence(err error) string {
	s := err.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func checkName(kind, n string) string {
	if !manifest.ValidName(n) {
		return fmt.Sprintf("%q is not a valid %s name: use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit.", n, kind)
	}
	return ""
}

func checkChecksum(s string) string {
	if checksumRE.MatchString(s) {
		return ""
	}
	if strings.HasPrefix(s, digest.Prefix) {
		hex := strings.TrimPrefix(s, digest.Prefix)
		return fmt.Sprintf("The digest has %d characters; a sha256 digest is 64 lowercase hex digits, as in \"sha256:%s\".", len(hex), strings.Repeat("0", 64))
	}
	return fmt.Sprintf("%q is not of the form \"sha256:<64 hex digits>\".", s)
}

// sizeUnits are the units of a disk size, lowercase: all binary, as
// qemu-img takes them (80G, 80GB, 80GiB and 80Gi are all 80 GiB).
var sizeUnits = map[string]uint{
	"b": 0,
	"k": 10, "kb": 10, "ki": 10, "kib": 10,
	"m": 20, "mb": 20, "mi": 20, "mib": 20,
	"g": 30, "gb": 30, "gi": 30, "gib": 30,
	"t": 40, "tb": 40, "ti": 40, "tib": 40,
	"p": 50, "pb": 50, "pi": 50, "pib": 50,
}

// parseSize reads a disk size such as "80G", "80g", "80GB", "512MiB" or
// "1073741824B". A unit is required (a bare 80 would be 80 bytes, never
// what is meant), in any case; units are binary, as qemu-img takes them.
func parseSize(s string) (int64, string) {
	const units = "K, M, G, T or P (binary, as qemu-img reads them: G, GB, GiB and Gi are all 2^30 bytes), or B for bytes"
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Sprintf("%q is not a size: write a whole number and a unit, such as \"80G\"; units are %s.", s, units)
	}
	if m[2] == "" {
		return 0, fmt.Sprintf("%q has no unit, which would make it %s bytes: write a unit, such as \"%sG\"; units are %s.", s, m[1], m[1], units)
	}
	shift, ok := sizeUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Sprintf("%q has an unknown unit %q: units are %s.", s, m[2], units)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Sprintf("%q is not a positive size.", s)
	}
	if n > (1<<62)>>shift {
		return 0, fmt.Sprintf("%q is too large.", s)
	}
	return n << shift, ""
}

func checkPackage(p string) string {
	switch {
	case strings.TrimSpace(p) == "":
		return "A package name is empty."
	case !packageRE.MatchString(p):
		return fmt.Sprintf("%q is not a Debian package name (lowercase letters, digits, '+', '-', '.'; optionally :arch, =version or /release).", p)
	}
	return ""
}

// kernelArgSpecial are the characters no kernel argument may carry. The
// args reach shell twice (the grub.d drop-in that update-grub sources,
// GRUB_CMDLINE_LINUX in /etc/default/grub) and then GRUB's linux line,
// which grub-mkconfig writes unquoted and GRUB's own shell-like parser
// splits: there ; | & < > ( ) { } $ ` quotes and backslashes are syntax,
// and * ? [ ] glob in the shell.
const kernelArgSpecial = ";|&<>(){}$`'\"\\*?[]"

// moduleOptionRE is a kernel module's option given on the command line:
// module.option=value.
var moduleOptionRE = regexp.MustCompile(`^([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)=(.*)$`)

// CheckKernelArg says why a kernel argument cannot be baked into an image,
// nil when it can: the rule the recipe's kernel block is checked with,
// which the compiled drop-in relies on.
func CheckKernelArg(a string) error {
	if msg := checkKernelArg(a); msg != "" {
		return errors.New(msg)
	}
	return nil
}

func checkKernelArg(a string) string {
	const lines = "the grub.d drop-in that update-grub sources as shell and GRUB's linux line cannot carry it"
	switch {
	case a == "":
		return "A kernel argument is empty."
	case strings.ContainsAny(a, " \t\n\r\v\f"):
		return fmt.Sprintf("%q contains whitespace: give each argument as its own list element.", a)
	case strings.ContainsFunc(a, func(r rune) bool { return r < 0x20 || r >= 0x7f }):
		return fmt.Sprintf("%q contains a control or non-ASCII character: %s.", a, lines)
	case strings.ContainsAny(a, kernelArgSpecial):
		c := a[strings.IndexAny(a, kernelArgSpecial)]
		return fmt.Sprintf("%q contains %q: %s. %s", a, c, lines, kernelArgAdvice(a))
	case strings.HasPrefix(a, "#"):
		return fmt.Sprintf("%q starts with '#': GRUB's linux line would read it and the rest of the line as a comment. %s", a, kernelArgAdvice(a))
	}
	return ""
}

// kernelArgAdvice says where a value the kernel command line cannot carry
// belongs instead.
func kernelArgAdvice(a string) string {
	m := moduleOptionRE.FindStringSubmatch(a)
	if m == nil {
		return "An option that needs it belongs in a file instead: a kernel module's option in /etc/modprobe.d, written by a file step of a layer."
	}
	content := fmt.Sprintf("options %s %s=%q\n", m[1], m[2], m[3])
	return fmt.Sprintf("%q is an option of the kernel module %s: it belongs in /etc/modprobe.d instead, written by a file step of a layer: file %q { content = %s }.",
		a, m[1], "/etc/modprobe.d/"+m[1]+".conf", strings.ReplaceAll(fmt.Sprintf("%q", content), "${", "$${"))
}

func checkUnit(u string) string {
	switch {
	case u == "" || !unitRE.MatchString(u):
		return fmt.Sprintf("%q is not a systemd unit name.", u)
	case strings.HasPrefix(u, "-"):
		return fmt.Sprintf("%q starts with '-': systemctl would read it as an option, not a unit.", u)
	}
	return ""
}

func checkOwner(o string) string {
	if !ownerRE.MatchString(o) {
		return fmt.Sprintf("%q is not an owner: write user or user:group, by name or number.", o)
	}
	return ""
}

func parseMode(s string) (uint32, string) {
	if !modeRE.MatchString(s) {
		return 0, fmt.Sprintf("%q is not an octal file mode such as \"0644\" (write it as a string: a bare 644 would be decimal).", s)
	}
	m, _ := strconv.ParseUint(s, 8, 32)
	return uint32(m), ""
}

// checkImagePath checks a path inside the image.
func checkImagePath(p string) string {
	switch {
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Sprintf("%q contains a control character.", p)
	case strings.ContainsAny(p, "\"'`$\\"):
		return fmt.Sprintf("%q contains a quote, backslash or $: the path is written into generated shell.", p)
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf("%q is not an absolute path in the image.", p)
	case path.Clean(p) != p && path.Clean(p)+"/" != p:
		return fmt.Sprintf("%q is not a clean path; write %q.", p, path.Clean(p))
	case path.Clean(p) == "/":
		return "The path is the root directory."
	case path.Clean(p) == "/boot/efi" || strings.HasPrefix(p, "/boot/efi/"):
		return "Nothing may be placed under /boot/efi: at deploy time MAAS mounts the EFI system partition (vfat) there before extracting the image."
	}
	return ""
}

func checkHTTPURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an http or https URL.", s)
	}
	return ""
}

func checkBind(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%q is not host:port, such as \"127.0.0.1:19999\".", s)
	}
	if host != "" && host != "*" && net.ParseIP(host) == nil && !manifest.ValidName(host) {
		return fmt.Sprintf("%q is not an IP address or host name.", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("%q is not a TCP port (1-65535).", port)
	}
	return ""
}

// NetdataCollector says how imagectl enables a Netdata collector: as one of
// the agent's internal plugins ([plugins] in netdata.conf) or as a go.d
// module (go.d.conf).
type NetdataCollector struct {
	Name   string
	Plugin bool
}

// netdataCollectors are the collectors imagectl knows how to enable.
var netdataCollectors = map[string]bool{
	// internal plugins: name -> true
	"apps": true, "cgroups": true, "diskspace": true, "ebpf": true, "idlejitter": true,
	"proc": true, "statsd": true, "tc": true, "timex": true, "perf": true, "slabinfo": true,
	// go.d modules: name -> false
	"nvidia_smi": false, "docker": false, "dockerhub": false, "nginx": false, "systemdunits": false,
	"smartctl": false, "sensors": false, "ping": false, "dnsmasq": false, "dnsmasq_dhcp": false,
	"libvirt": false, "nvme": false, "ipmi": false, "chrony": false,
	"k8s_kubelet": false, "prometheus": false, "httpcheck": false, "portcheck": false, "intelgpu": false,
}

// Collector looks up a known Netdata collector.
func Collector(name string) (NetdataCollector, bool) {
	plugin, ok := netdataCollectors[name]
	return NetdataCollector{Name: name, Plugin: plugin}, ok
}

func checkCollector(c string) string {
	if _, ok := netdataCollectors[c]; ok {
		return ""
	}
	names := slices.Sorted(maps.Keys(netdataCollectors))
	msg := fmt.Sprintf("%q is not a Netdata collector imagectl knows.", c)
	if s := suggest(c, names); s != "" {
		return msg + fmt.Sprintf(" Did you mean %q?", s)
	}
	return msg + " Known collectors: " + strings.Join(names, ", ") + "."
}

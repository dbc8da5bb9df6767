package smoke

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpuaas/imagectl/builder/firstboot"
	"github.com/gpuaas/imagectl/internal/shell"
)

// The files the deploy writes into the target besides the tarball. Each
// stands in for what curtin or MAAS writes on a real deploy, except the
// smoke unit, which replaces the operator's first look at the host.

// Console markers: the smoke unit and the bootstrap runner print these on
// the serial console; bootstrapPrefix starts each line of the bootstrap's
// output.
const (
	markerPrefix    = "IMAGECTL_SMOKE "
	bootstrapPrefix = "IMAGECTL_BOOTSTRAP "
	smokeScript     = "/usr/local/sbin/imagectl-smoke"
	smokeUnit       = "/etc/systemd/system/imagectl-smoke.service"
	// kernelOpts stand in for MAAS's kernel_opts plus the console= curtin
	// carries over from the ephemeral environment's command line.
	kernelOpts = "console=ttyS0,115200"
)

// fstab is curtin's fstab for the flat layout: by-uuid specs, "defaults",
// passno 1 for block filesystems, each line after a comment naming the
// device it was on (block_meta.fstab_line_for_data).
func fstab(rootUUID, espUUID string) string {
	return fmt.Sprintf("# / was on /dev/sda2 during curtin installation\n"+
		"/dev/disk/by-uuid/%s / ext4 defaults 0 1\n"+
		"# /boot/efi was on /dev/sda1 during curtin installation\n"+
		"/dev/disk/by-uuid/%s /boot/efi vfat defaults 0 1\n", rootUUID, espUUID)
}

// seedMetaData is a minimal NoCloud meta-data: MAAS's datasource hands
// cloud-init an instance id and a hostname.
func seedMetaData(instanceID string) string {
	return "instance-id: " + instanceID + "\nlocal-hostname: imagectl-smoke\n"
}

// seedUserData is the NoCloud user-data, standing in for MAAS's deploy
// user-data: empty, or a login with authorized keys and passwordless sudo
// (what MAAS's deploy gives the node's owner), and at stage converged a
// runcmd that runs the site bootstrap. runcmd runs in cloud-final, which
// the boot waits for, so the bootstrap has ended before the smoke unit's
// `systemctl is-system-running --wait` returns and the validation starts.
// Every value is a JSON string, which YAML reads as a double-quoted scalar
// whatever it holds.
func seedUserData(b *bootstrapSpec, login *guestLogin) string {
	if b == nil && login == nil {
		return "#cloud-config\n{}\n"
	}
	s := "#cloud-config\n"
	if login != nil {
		s += "# imagectl smoke: the login MAAS's deploy gives the node's owner.\n" +
			"users:\n" +
			"  - name: " + yamlQuote(login.user) + "\n" +
			"    shell: \"/bin/bash\"\n" +
			"    lock_passwd: true\n" +
			"    sudo: \"ALL=(ALL) NOPASSWD:ALL\"\n" +
			"    ssh_authorized_keys:\n"
		for _, k := range login.keys {
			s += "      - " + yamlQuote(k) + "\n"
		}
	}
	if b != nil {
		s += "# imagectl smoke: the site bootstrap, as MAAS deploy user-data runs it.\n" +
			"runcmd:\n" +
			"  - [\"sh\", \"-c\", " + yamlQuote(bootstrapScript(b, defaultGuestPaths)) + "]\n"
	}
	return s
}

// userData is the seed's user-data: seedUserData's, or on the first-boot
// path firstBootUserData's.
func userData(p guestPlan) string {
	if p.firstBoot != nil {
		return firstBootUserData(*p.firstBoot, p.bootstrap, p.login)
	}
	return seedUserData(p.bootstrap, p.login)
}

// userDataMode is the seed's mode: root's alone when it carries a
// sensitive value (firstboot.Result.Mode).
func userDataMode(p guestPlan) int {
	if p.firstBoot != nil {
		return int(p.firstBoot.Mode(true))
	}
	return 0o644
}

// firstBootUserData is the first-boot path's user-data: the first-boot
// script's (firstboot.UserData: write_files puts the script on the host,
// runcmd's first entry runs it with -e on), then in the same runcmd the
// site bootstrap seedUserData runs, which therefore runs only when the
// script succeeded, and only when the script requires no reboot
// (firstBootBootstrap), then the login. cloud-init runs runcmd's entries
// in order, in one script.
func firstBootUserData(fb firstboot.Result, b *bootstrapSpec, login *guestLogin) string {
	s := string(fb.UserData())
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	if b != nil {
		s += "  # imagectl smoke: the site bootstrap, after the first-boot script (after its reboot when it requires one).\n" +
			"  - [\"sh\", \"-c\", " + yamlQuote(firstBootBootstrap(b, defaultGuestPaths)) + "]\n"
	}
	if login != nil {
		s += strings.TrimPrefix(seedUserData(nil, login), "#cloud-config\n")
	}
	return s
}

// rebootPending is the shell test that the first-boot script succeeded
// and requires a reboot: its result line (in its state directory) says
// status=ok and reboot_required=yes. A failed script that changed the
// kernel args reboots nothing: its failure is the path's.
func rebootPending(g guestPaths) string {
	result := shell.Quote(g.firstBoot + "/result")
	return "grep -q ' status=ok' " + result + " 2>/dev/null && grep -q ' reboot_required=yes' " + result + " 2>/dev/null"
}

// firstBootBootstrap is the first-boot path's runcmd entry for the site
// bootstrap: bootstrapScript, unless the first-boot script requires a
// reboot. Then the host is handed to the site bootstrap only after that
// reboot, as an operator of that path does (install, reboot for the
// kernel args, then the bootstrap): the smoke script runs it in the
// second boot, before the validation (secondBootBootstrap), so that what
// it did at runtime (a module loaded, a service started) is there when
// the validation runs, as on the baked path.
func firstBootBootstrap(b *bootstrapSpec, g guestPaths) string {
	return "if " + rebootPending(g) + "; then\n" +
		"\texit 0 # the smoke script runs the bootstrap after the reboot\n" +
		"fi\n" + bootstrapScript(b, g)
}

// datasourceConfig mirrors curtin's 95-cloudconfig-*.cfg, which pins
// cloud-init to MAAS's datasource; here, the NoCloud seed.
const datasourceConfig = "datasource_list: [ NoCloud, None ]\n"

// networkConfig mirrors curtin's 50-curtin-networking.cfg: the network
// config MAAS sends, as netplan v2, which cloud-init renders on first boot.
// MAAS names the node's interfaces; here the VM's one virtio NIC gets DHCP.
const networkConfig = `network:
  version: 2
  ethernets:
    nic0:
      match:
        driver: virtio_net
      dhcp4: true
`

// curtinGrubSettings is what curtin appends to
// /etc/default/grub.d/50-curtin-settings.cfg on Debian-family targets
// (install_grub.write_grub_config with MAAS's defaults).
const curtinGrubSettings = "# Curtin disable grub os prober that might find other OS installs.\n" +
	"GRUB_DISABLE_OS_PROBER=\"true\"\n" +
	"# Curtin configured GRUB_TERMINAL value\n" +
	"GRUB_TERMINAL=\"console\""

// replaceCmdlineDefault is curtin's replace_grub_cmdline_linux_default:
// the first GRUB_CMDLINE_LINUX_DEFAULT= match (its regex is unanchored, so
// a commented one counts) is replaced; without one the line is appended.
func replaceCmdlineDefault(grub, args string) string {
	line := `GRUB_CMDLINE_LINUX_DEFAULT="` + args + `"`
	i := strings.Index(grub, "GRUB_CMDLINE_LINUX_DEFAULT=")
	if i < 0 {
		if grub != "" && !strings.HasSuffix(grub, "\n") {
			grub += "\n"
		}
		return grub + line + "\n"
	}
	end := strings.IndexByte(grub[i:], '\n')
	if end < 0 {
		return grub[:i] + line
	}
	return grub[:i] + line + grub[i+end:]
}

// guestPaths are where the guest scripts talk and keep state; tests run
// the scripts with their own.
type guestPaths struct {
	tty       string // the serial console
	state     string // the bootstrap's exit status, its output's FIFO
	log       string // the bootstrap's output
	firstBoot string // the first-boot script's state: its result line, its done marker
	rebooted  string // the first-boot path's note that it rebooted the VM
}

var defaultGuestPaths = guestPaths{
	tty:       "/dev/ttyS0",
	state:     "/run/imagectl-smoke",
	log:       "/var/log/imagectl-smoke-bootstrap.log",
	firstBoot: firstboot.StateDir,
	rebooted:  rebootedMarker,
}

// guestFile is a file the deploy writes into the target.
type guestFile struct {
	path, content string
	mode          int
}

// guestFiles are the files that stand in for what curtin and MAAS write
// (cloud-init's datasource, network config and NoCloud seed), then the
// smoke unit and its script.
func guestFiles(p guestPlan, instanceID string) []guestFile {
	files := []guestFile{
		{"/etc/cloud/cloud.cfg.d/95-cloudconfig-imagectl-smoke.cfg", datasourceConfig, 0o644},
		{"/etc/cloud/cloud.cfg.d/50-curtin-networking.cfg", networkConfig, 0o644},
		{"/var/lib/cloud/seed/nocloud/meta-data", seedMetaData(instanceID), 0o644},
		{"/var/lib/cloud/seed/nocloud/user-data", userData(p), userDataMode(p)},
		// Not curtin: the smoke unit that reports on the console.
		{smokeScript, smokeScriptFor(p, defaultGuestPaths), 0o755},
		{smokeUnit, smokeUnitFile, 0o644},
	}
	if p.emulated {
		files = append(files, guestFile{emulatedAllowance, emulatedAllowanceConf, 0o644})
	}
	return files
}

// emulatedAllowance is the drop-in a boot under TCG gets for the units
// whose own start timeout is sized for hardware: netplan's Open vSwitch
// units (netplan-ovs-cleanup and one per bridge, 10 s each: a Python
// program and ovs-vsctl calls that take longer under emulation, most of
// all on a loaded host), through systemd's prefix drop-in for every unit
// named netplan-ovs-*. Under KVM none is written: the boot is judged as
// the hardware would run it.
const emulatedAllowance = "/etc/systemd/system/netplan-ovs-.service.d/imagectl-smoke-emulated.conf"

const emulatedAllowanceConf = `# Written by imagectl smoke for a boot under TCG (software emulation,
# 10-30x slower than hardware): netplan's Open vSwitch units get 5 min to
# start instead of the 10 s they are given for hardware.
[Service]
TimeoutStartSec=5min
`

// yamlQuote writes s as a JSON string, which YAML reads as a double-quoted
// scalar whatever s holds.
func yamlQuote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// sayFunc is the shell function that writes one line to the console, with
// its own open of the port so a getty's hangup of it cannot cut the output,
// and with journal to stdout too. uptime_s is the guest's monotonic clock.
func sayFunc(tty string, journal bool) string {
	also := ""
	if journal {
		also = "\n\tprintf '%s\\n' \"$*\""
	}
	return `say() {
	printf '%s\r\n' "$*" >>` + shell.Quote(tty) + ` 2>/dev/null` + also + `
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }
boot_id() { cat /proc/sys/kernel/random/boot_id 2>/dev/null; }
`
}

// bootField ends every clock, time and systemd line of the smoke's guest
// scripts: the boot it was read in (the kernel's boot id), so that the
// watcher places no time on another boot's clock (watcher.checkBoot).
const bootField = " boot=$(boot_id)"

// bootstrapScript runs the site bootstrap as user-data's runcmd does, in
// cloud-final: the bundle's entrypoint, in the bundle's directory, with the
// profile's environment. It writes the bootstrap's times on the console (not
// on stdout, which cloud-final copies to the console too) and
// its exit status where the smoke script reads it, and exits with it (so a
// failed bootstrap fails cloud-final, as on a real deploy). The output goes
// through a FIFO to the log and the console; the relay is waited for a few
// seconds only, since a daemon the bootstrap leaves behind may hold the
// FIFO open.
func bootstrapScript(b *bootstrapSpec, g guestPaths) string {
	run := append([]string{"exec", "env"}, b.envAssignments()...)
	run = append(run, shell.Quote(b.entrypoint))
	return `set -u
` + sayFunc(g.tty, false) + `state=` + shell.Quote(g.state) + `
log=` + shell.Quote(g.log) + `
mkdir -p "$state"
rm -f "$state/bootstrap.exit" "$state/bootstrap.fifo"
mkfifo "$state/bootstrap.fifo"
(
	while IFS= read -r line || [ -n "$line" ]; do
		printf '%s\n' "$line" >>"$log"
		say "` + bootstrapPrefix + `$line"
	done <"$state/bootstrap.fifo"
) &
relay=$!
say "` + markerPrefix + `time ` + MilestoneBootstrapStart + `=$(uptime_s)` + bootField + `"
(cd ` + shell.Quote(b.dir) + ` && ` + strings.Join(run, " ") + `) >"$state/bootstrap.fifo" 2>&1 </dev/null
rc=$?
say "` + markerPrefix + `time ` + MilestoneBootstrapDone + `=$(uptime_s)` + bootField + `"
i=0
while kill -0 "$relay" 2>/dev/null && [ "$i" -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
echo "$rc" >"$state/bootstrap.exit"
exit "$rc"
`
}

// smokeUnitFile runs the smoke script once the boot has reached
// multi-user.target. Type=simple: its start job ends at once, so
// `systemctl is-system-running --wait` inside it does not wait for itself.
const smokeUnitFile = `[Unit]
Description=imagectl smoke test: report the boot and the image's validation on the serial console, then power off
After=multi-user.target

[Service]
Type=simple
ExecStart=` + smokeScript + `

[Install]
WantedBy=multi-user.target
`

// smokeScriptFor is the script the smoke unit runs: it waits for the boot
// to finish (cloud-final and with it any bootstrap included), reports the
// system state, failed units, kernel command line and the bootstrap's exit
// status, runs the image's validation script for the profile and stage and
// relays its lines, reports the bytes the guest received and the boot's
// systemd timestamps, and powers off.
// Its clock lines tie the guest's monotonic clock to the host's.
func smokeScriptFor(p guestPlan, g guestPaths) string {
	return `#!/bin/sh
# Written by imagectl smoke into its scratch disk only; never part of an image.
` + sayFunc(g.tty, true) + rxBytesFunc + `dmesg -n 1 2>/dev/null
say "` + markerPrefix + `clock=$(uptime_s)` + bootField + `"
say "` + markerPrefix + `multi-user"
# Report what is still starting, once a minute, until the boot settles.
(
	while sleep 60; do
		say "` + markerPrefix + `waiting jobs=$(systemctl list-jobs --no-legend --plain 2>/dev/null | awk '{ printf "%s,", $2 }')"
	done
) &
ticker=$!
state=$(systemctl is-system-running --wait 2>/dev/null)
kill "$ticker" 2>/dev/null
say "` + markerPrefix + `state=${state:-unknown}"
systemctl list-units --failed --no-legend --plain 2>/dev/null | while read -r unit _; do
	say "` + markerPrefix + `failed-unit=$unit"
done
say "` + markerPrefix + `cmdline=$(cat /proc/cmdline)"
` + firstBootReport(p, g) + bootstrapReport(p, g) + `say "` + markerPrefix + `time ` + MilestoneValidationStart + `=$(uptime_s)` + bootField + `"
if [ -f ` + shell.Quote(p.validation) + ` ]; then
	{
		sh ` + shell.Quote(p.validation) + ` --profile ` + shell.Quote(p.profile) + ` --stage ` + shell.Quote(p.stage) + ` 2>&1
		echo "` + markerPrefix + `validate-exit=$?"
	} | while IFS= read -r line; do say "$line"; done
else
	say "` + markerPrefix + `no-validation-script="` + shell.Quote(p.validation) + `
fi
say "` + markerPrefix + `time ` + MilestoneValidationDone + `=$(uptime_s)` + bootField + `"
say "` + markerPrefix + `received-bytes=$(rx_bytes)"
` + systemdReport() + `say "` + markerPrefix + `clock=$(uptime_s)` + bootField + `"
say "` + markerPrefix + `done"
` + powerOffLine(p)
}

// rxBytesFunc is the shell function that prints what the guest's network
// interfaces but lo received, in bytes, since this boot started: the
// same measure of the downloads on both paths, whatever fetched them
// (apt, cloud-init, the bootstrap).
const rxBytesFunc = `rx_bytes() {
	rx_total=0
	for rx_file in /sys/class/net/*/statistics/rx_bytes; do
		case $rx_file in
		*/lo/*) continue ;;
		esac
		rx_n=$(cat "$rx_file" 2>/dev/null) || rx_n=0
		rx_total=$((rx_total + ${rx_n:-0}))
	done
	echo "$rx_total"
}
`

// powerOffLine ends the smoke script: a poweroff, or nothing when the VM
// stays up for the caller (Options.WhileUp), who has QEMU press its power
// button when done.
func powerOffLine(p guestPlan) string {
	if p.keepUp {
		return "# The VM stays up: imagectl smoke presses its power button once the caller is done.\n"
	}
	return "systemctl poweroff\n"
}

// rebootedMarker is where the first-boot path's smoke script notes that it
// rebooted the VM, so that the second boot validates.
const rebootedMarker = "/var/lib/imagectl-smoke/rebooted"

// firstBootReport is, on the first-boot path, the smoke script's copy of
// the first-boot script's result line (kept in its state directory; the
// console's may be cut by other output), and its reboot: when the script
// succeeded and requires one (kernel args take effect only then) and the
// VM has not rebooted yet, the first boot's systemd times are reported,
// the VM reboots, and the smoke unit runs again in the second boot, where
// the site bootstrap (secondBootBootstrap) and the validation run.
func firstBootReport(p guestPlan, g guestPaths) string {
	if p.firstBoot == nil {
		return ""
	}
	result := shell.Quote(g.firstBoot + "/result")
	rebooted := shell.Quote(g.rebooted)
	return `if [ -f ` + result + ` ]; then
	say "` + firstboot.Prefix + ` $(cat ` + result + `)"
fi
if [ ! -e ` + rebooted + ` ] && ` + rebootPending(g) + `; then
` + indent(systemdReport()) + `	say "` + markerPrefix + `received-bytes=$(rx_bytes)"
	say "` + markerPrefix + `clock=$(uptime_s)` + bootField + `"
	mkdir -p "$(dirname ` + rebooted + `)"
	: >` + rebooted + `
	sync
	say "` + markerPrefix + `reboot"
	systemctl reboot
	exit 0
fi
` + secondBootBootstrap(p, g)
}

// secondBootBootstrap is, on the first-boot path at stage converged, the
// smoke script's run of the site bootstrap in the second boot: when the
// VM rebooted for the first-boot script, which succeeded (its done
// marker), and the bootstrap has not run in this boot, it runs as
// cloud-init's runcmd would have (bootstrapScript in a subshell, timed by
// its own bootstrap-start and bootstrap-done lines), before the
// validation. It is not indented: a value may span lines.
func secondBootBootstrap(p guestPlan, g guestPaths) string {
	if p.bootstrap == nil {
		return ""
	}
	return `if [ -e ` + shell.Quote(g.rebooted) + ` ] && [ -e ` + shell.Quote(g.firstBoot+"/"+firstboot.DoneMarker) + ` ] && [ ! -f ` + shell.Quote(g.state+"/bootstrap.exit") + ` ]; then
	# shellcheck disable=SC2016 # the bootstrap's values are single-quoted data: a $ in them is not to expand
	(
` + bootstrapScript(p.bootstrap, g) + `	) </dev/null >/dev/null 2>&1
fi
`
}

// indent indents every line of a shell fragment by a tab.
func indent(s string) string {
	if s == "" {
		return ""
	}
	return "\t" + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n\t") + "\n"
}

// bootstrapReport is the smoke script's report of the bootstrap: its exit
// status, or that it never finished (cloud-init did not run it before the
// boot settled).
func bootstrapReport(p guestPlan, g guestPaths) string {
	if p.bootstrap == nil {
		return ""
	}
	exit := shell.Quote(g.state + "/bootstrap.exit")
	return `if [ -f ` + exit + ` ]; then
	say "` + markerPrefix + `bootstrap-exit=$(cat ` + exit + `)"
else
	say "` + markerPrefix + `bootstrap-unfinished"
fi
`
}

// systemdReport prints systemdTimes, one console line per unit:
// "systemd unit=U Property=µs ...".
func systemdReport() string {
	var b strings.Builder
	for i := 0; i < len(systemdTimes); {
		unit := systemdTimes[i].unit
		args := []string{"systemctl", "show"}
		for ; i < len(systemdTimes) && systemdTimes[i].unit == unit; i++ {
			args = append(args, "-p", systemdTimes[i].property)
		}
		if unit != systemdManager {
			args = append(args, unit)
		}
		fmt.Fprintf(&b, "say \"%ssystemd unit=%s%s $(%s 2>/dev/null | tr '\\n' ' ')\"\n", markerPrefix, unit, bootField, strings.Join(args, " "))
	}
	return b.String()
}

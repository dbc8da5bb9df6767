package smoke

import (
	"fmt"
	"strings"
)

// The files the deploy writes into the target besides the tarball. Each
// stands in for what curtin or MAAS writes on a real deploy, except the
// smoke unit, which replaces the operator's first look at the host.

// Console markers: the smoke unit prints these on the serial console.
const (
	markerPrefix = "IMAGECTL_SMOKE "
	smokeScript  = "/usr/local/sbin/imagectl-smoke"
	smokeUnit    = "/etc/systemd/system/imagectl-smoke.service"
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

// seedMetaData and seedUserData are a minimal NoCloud seed: MAAS's
// datasource hands cloud-init an instance id, a hostname and user-data.
func seedMetaData(instanceID string) string {
	return "instance-id: " + instanceID + "\nlocal-hostname: imagectl-smoke\n"
}

const seedUserData = "#cloud-config\n{}\n"

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
// to finish, reports the system state, failed units and kernel command
// line, runs the image's validation script, relays its lines, and powers
// off. Each console line is written with its own open of /dev/ttyS0 so a
// getty's hangup of the port cannot cut the output.
func smokeScriptFor(validation string) string {
	return `#!/bin/sh
# Written by imagectl smoke into its scratch disk only; never part of an image.
say() {
	printf '%s\r\n' "$*" >/dev/ttyS0 2>/dev/null
	printf '%s\n' "$*"
}
dmesg -n 1 2>/dev/null
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
if [ -f ` + shq(validation) + ` ]; then
	{
		sh ` + shq(validation) + ` 2>&1
		echo "` + markerPrefix + `validate-exit=$?"
	} | while IFS= read -r line; do say "$line"; done
else
	say "` + markerPrefix + `no-validation-script=` + validation + `"
fi
say "` + markerPrefix + `done"
systemctl poweroff
`
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

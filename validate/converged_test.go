package validate

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/manifest"
)

// The profile and stage checks run live on a fake host: stand-in ip and
// systemctl, files under IMAGECTL_VALIDATE_ROOT. The values are a recipe's
// (the runbook's slice host); the script knows none of them.

const (
	ibDone    = "/var/lib/gpuaas/site-bootstrap/h200-ib.done"
	sliceDone = "/var/lib/gpuaas/site-bootstrap/h200-slice-vm.done"
	netplan   = "/etc/netplan/60-ipoib.yaml"
	subnetCfg = "/etc/dnsmasq.d/gpu_subnet.conf"
)

var sliceUnits = []string{"gpuaas-node-agent", "gpuaas-slice-fabric-vfs", "gpuaas-slice-vfio-devices",
	"gpuaas-slice-network-baseline", "gpuaas-slice-ovs-bridge", "libvirtd", "dnsmasq", "docker"}

func profilesManifest() *manifest.Manifest {
	bundle := func(name string) manifest.Bundle {
		return manifest.Bundle{Name: name, Destination: "/usr/local/share/gpuaas/site-bootstrap/" + name + "/", Entrypoint: "bootstrap.sh"}
	}
	return &manifest.Manifest{
		SchemaVersion: manifest.SchemaVersion,
		Image:         manifest.Image{Name: "h200", Version: "2.0.0"},
		KernelArgs:    []string{"intel_iommu=on", "iommu=pt"},
		Bundles:       []manifest.Bundle{bundle("h200-ib"), bundle("h200-slice-vm")},
		Validation: manifest.Validation{Script: "/usr/local/sbin/h200-validate.sh", Marker: marker,
			ServicesActive: []string{"gpuaas-node-agent"},
			Profiles: []manifest.Profile{
				{Name: manifest.ProfileBareMetal, Bootstrap: "h200-ib", Converged: &manifest.Converged{
					ServicesActive: []string{"gpuaas-node-agent", "docker"}, DoneMarkers: []string{ibDone}}},
				{Name: manifest.ProfileSlice, ServicesActive: []string{"libvirtd"},
					VFIOModules: []string{"vfio", "vfio_iommu_type1", "vfio-pci"}, Bootstrap: "h200-slice-vm",
					Converged: &manifest.Converged{
						ServicesActive: []string{"gpuaas-node-agent", "gpuaas-slice-fabric-vfs", "gpuaas-slice-vfio-devices",
							"gpuaas-slice-network-baseline", "gpuaas-slice-ovs-bridge", "libvirtd", "dnsmasq"},
						FilesExist:  []string{netplan},
						DoneMarkers: []string{ibDone, sliceDone},
						Fabric:      &manifest.Fabric{Netplan: netplan, Interface: "ibp*", Subnet: "192.168.0.0/16"},
						Bridges:     []manifest.Bridge{{Name: "ovsbr0", Address: "10.100.0.1/24"}},
						DHCP:        &manifest.DHCP{Service: "dnsmasq", SubnetFile: subnetCfg},
					}},
			}},
	}
}

// fakeIP replays $FAKE_IP/link, addr and route (ip -o formats), filtered by dev.
const fakeIP = `obj='' dev=''
while [ $# -gt 0 ]; do
	case $1 in
	-4 | -o) ;;
	link | addr | address | route) obj=$1 ;;
	show) ;;
	dev) dev=$2; shift ;;
	*) echo "ip stand-in: $1" >&2; exit 1 ;;
	esac
	shift
done
[ "$obj" = address ] && obj=addr
if [ -n "$dev" ]; then
	if ! awk -F': ' -v d="$dev" '$2 == d { f = 1 } END { exit !f }' "$FAKE_IP/link"; then
		echo "Device \"$dev\" does not exist." >&2
		exit 1
	fi
	awk -v d="$dev" '$2 == d' "$FAKE_IP/$obj"
else
	cat "$FAKE_IP/$obj"
fi
`

var (
	ipLinks = []string{
		"1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00",
		"2: eno1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP mode DEFAULT group default qlen 1000\\    link/ether 3c:ec:ef:00:00:01 brd ff:ff:ff:ff:ff:ff",
		"5: ibp13s0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 2044 qdisc mq state UP mode DEFAULT group default qlen 256\\    link/infiniband 00:00:10:29:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01 brd 00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff",
		"6: ibp13s0.8001@ibp13s0: <BROADCAST,MULTICAST> mtu 2044 qdisc noop state DOWN mode DEFAULT group default qlen 256\\    link/infiniband 00:00:10:2b:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01 brd 00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff",
		"9: ovsbr0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\    link/ether 52:54:00:00:00:01 brd ff:ff:ff:ff:ff:ff",
	}
	ipAddrs = []string{
		"1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever",
		"2: eno1    inet 10.177.36.171/22 brd 10.177.39.255 scope global eno1\\       valid_lft forever preferred_lft forever",
		"5: ibp13s0    inet 192.168.13.11/24 brd 192.168.13.255 scope global ibp13s0\\       valid_lft forever preferred_lft forever",
		"9: ovsbr0    inet 10.100.0.1/24 brd 10.100.0.255 scope global ovsbr0\\       valid_lft forever preferred_lft forever",
	}
	ipRoutes = []string{
		"default via 10.177.36.1 dev eno1 proto static",
		"10.100.0.0/24 dev ovsbr0 proto kernel scope link src 10.100.0.1",
		"10.177.36.0/22 dev eno1 proto kernel scope link src 10.177.36.171",
		"192.168.13.0/24 dev ibp13s0 proto kernel scope link src 192.168.13.11",
	}
)

// network writes what the stand-in ip reports.
func (h *host) network(links, addrs, routes []string) {
	h.t.Helper()
	h.stub("ip", fakeIP)
	h.file("fake-ip/link", strings.Join(links, "\n")+"\n")
	h.file("fake-ip/addr", strings.Join(addrs, "\n")+"\n")
	h.file("fake-ip/route", strings.Join(routes, "\n")+"\n")
	h.env["FAKE_IP"] = h.root + "/fake-ip"
}

// healthySlice lays out what the slice prerequisites read.
func healthySlice(h *host) {
	h.file("dev/kvm", "")
	for _, g := range []string{"0", "1", "2"} {
		h.dir("sys/kernel/iommu_groups/" + g)
	}
	for _, mod := range []string{"vfio", "vfio_iommu_type1", "vfio_pci"} {
		h.dir("sys/module/" + mod)
	}
}

// convergedHost is a slice host converged as the recipe wants it (no GPU
// block in the recipe, so no nvidia-smi).
func convergedHost(t *testing.T, awk string) *host {
	t.Helper()
	h := newHost(t, awk)
	h.file(marker, "{\n  \"version\": \"2.0.0\",\n  \"top_key\": \"\"\n}\n")
	h.file("etc/default/grub", "GRUB_CMDLINE_LINUX=\"intel_iommu=on iommu=pt\"\n")
	h.file("etc/default/grub.d/99-imagectl-kernel-args.cfg", compile.GrubDropInContent([]string{"intel_iommu=on", "iommu=pt"}))
	h.file("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=UUID=x ro intel_iommu=on iommu=pt\n")
	healthySlice(h)
	for _, f := range []string{ibDone, sliceDone, netplan, subnetCfg} {
		h.file(f, "")
	}
	h.active(sliceUnits...)
	h.network(ipLinks, ipAddrs, ipRoutes)
	return h
}

func without(list []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return strings.Contains(s, drop) })
}

func TestConvergedSlicePasses(t *testing.T) {
	t.Parallel()
	for _, awk := range awks() {
		t.Run(awk, func(t *testing.T) {
			t.Parallel()
			o := convergedHost(t, awk).run(profilesManifest(), "--profile", "slice", "--stage", "converged")
			if o.code != 0 || len(o.failed()) > 0 || o.summary["warnings"] != "0" {
				t.Fatalf("exit %d:\n%s%s", o.code, o.out, o.stderr)
			}
			for check, detail := range map[string]string{
				"slice:kvm":                      "/dev/kvm",
				"slice:iommu-groups":             "3 IOMMU groups",
				"slice:vfio:vfio":                "loaded",
				"slice:vfio:vfio-pci":            "loaded",
				"kernel-arg:iommu=pt:cmdline":    "in /proc/cmdline",
				"service-active:libvirtd":        "active",
				"done-marker:h200-ib.done":       "present",
				"done-marker:h200-slice-vm.done": "present",
				"fabric:netplan":                 netplan,
				"fabric:address":                 "ibp13s0 192.168.13.11/24 in 192.168.0.0/16",
				"fabric:route":                   "192.168.13.0/24 dev ibp13s0",
				"bridge:ovsbr0":                  "ovsbr0 has 10.100.0.1/24",
				"dhcp:dnsmasq":                   "dnsmasq active, " + subnetCfg + " present",
				"exists:" + netplan:              "present",
			} {
				o.expect(t, check, "PASS", detail)
			}
			// Each unit once, whichever lists name it.
			for _, u := range sliceUnits[:7] {
				o.get(t, "service-active:"+u)
			}
			if len(o.with("service-active:")) != 7 {
				t.Errorf("service-active lines: %+v", o.with("service-active:"))
			}
			want := map[string]string{"profile": "slice", "stage": "converged", "failures": "0", "warnings": "0"}
			for k, v := range want {
				if o.summary[k] != v {
					t.Errorf("summary %s=%s, want %s", k, o.summary[k], v)
				}
			}
		})
	}
}

func TestConvergedFindings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		stage  string
		breaks func(h *host)
		check  string
		status string
		detail []string
		fix    []string // remediation has these
		others []string // further failures
	}{
		{name: "h200-ib marker missing", breaks: func(h *host) { h.remove(ibDone) },
			check: "done-marker:h200-ib.done", status: "FAIL",
			detail: []string{ibDone, "slice host baseline is incomplete, whatever else passed"},
			fix:    []string{"site bootstrap h200-ib (/usr/local/share/gpuaas/site-bootstrap/h200-ib/bootstrap.sh)", "h200-slice-vm"}},
		{name: "bridge without address", breaks: func(h *host) { h.network(ipLinks, without(ipAddrs, "ovsbr0"), ipRoutes) },
			check: "bridge:ovsbr0", status: "FAIL", detail: []string{"no IPv4 address", "expected 10.100.0.1/24"}},
		{name: "bridge with another address", breaks: func(h *host) {
			h.network(ipLinks, append(without(ipAddrs, "ovsbr0"), "9: ovsbr0    inet 10.100.0.1/16 scope global ovsbr0"), ipRoutes)
		}, check: "bridge:ovsbr0", status: "FAIL", detail: []string{"ovsbr0 has 10.100.0.1/16", "expected 10.100.0.1/24"}},
		{name: "no bridge", breaks: func(h *host) {
			h.network(without(ipLinks, "ovsbr0"), without(ipAddrs, "ovsbr0"), without(ipRoutes, "ovsbr0"))
		}, check: "bridge:ovsbr0", status: "FAIL", detail: []string{"no interface ovsbr0", "does not exist"}},
		{name: "no InfiniBand", breaks: func(h *host) {
			h.network(without(ipLinks, "ibp"), without(ipAddrs, "ibp"), without(ipRoutes, "ibp"))
		}, check: "fabric:address", status: "WARN", detail: []string{"no ibp* interface: no InfiniBand hardware"}},
		{name: "no InfiniBand, route", breaks: func(h *host) {
			h.network(without(ipLinks, "ibp"), without(ipAddrs, "ibp"), without(ipRoutes, "ibp"))
		}, check: "fabric:route", status: "WARN", detail: []string{"no ibp* interface"}},
		{name: "fabric address outside the subnet", breaks: func(h *host) {
			h.network(ipLinks, append(without(ipAddrs, "ibp"), "5: ibp13s0    inet 192.169.13.11/24 scope global ibp13s0"), ipRoutes)
		}, check: "fabric:address", status: "FAIL", detail: []string{"no ibp* interface has an address in 192.168.0.0/16", "ibp13s0 192.169.13.11/24"}},
		{name: "IB interface without address", breaks: func(h *host) { h.network(ipLinks, without(ipAddrs, "ibp"), ipRoutes) },
			check: "fabric:address", status: "FAIL", detail: []string{"have: none"}},
		{name: "no fabric route", breaks: func(h *host) { h.network(ipLinks, ipAddrs, without(ipRoutes, "ibp")) },
			check: "fabric:route", status: "FAIL", detail: []string{"no route into 192.168.0.0/16 via a ibp* interface"}},
		{name: "fabric route via another interface", breaks: func(h *host) {
			h.network(ipLinks, ipAddrs, append(without(ipRoutes, "ibp"), "192.168.0.0/16 via 10.177.36.1 dev eno1"))
		}, check: "fabric:route", status: "FAIL"},
		{name: "route wider than the subnet", breaks: func(h *host) {
			h.network(ipLinks, ipAddrs, append(without(ipRoutes, "ibp"), "192.0.0.0/8 dev ibp13s0 scope link"))
		}, check: "fabric:route", status: "FAIL"},
		{name: "netplan missing", breaks: func(h *host) { h.remove(netplan) },
			check: "fabric:netplan", status: "FAIL", fix: []string{"netplan apply", "h200-slice-vm"}, others: []string{"exists:" + netplan}},
		{name: "dnsmasq inactive", breaks: func(h *host) { h.active(without(sliceUnits, "dnsmasq")...) },
			check: "dhcp:dnsmasq", status: "FAIL", detail: []string{"dnsmasq inactive", subnetCfg + " present"},
			others: []string{"service-active:dnsmasq"}},
		{name: "subnet file missing", breaks: func(h *host) { h.remove(subnetCfg) },
			check: "dhcp:dnsmasq", status: "FAIL", detail: []string{"dnsmasq active", subnetCfg + " missing"}},
		{name: "slice service inactive", breaks: func(h *host) { h.active(without(sliceUnits, "network-baseline")...) },
			check: "service-active:gpuaas-slice-network-baseline", status: "FAIL", detail: []string{"inactive"},
			fix: []string{"systemctl status gpuaas-slice-network-baseline", "h200-slice-vm"}},
		{name: "no kvm", breaks: func(h *host) { h.remove("dev/kvm") }, check: "slice:kvm", status: "FAIL"},
		{name: "no IOMMU groups", breaks: func(h *host) { h.remove("sys/kernel/iommu_groups") },
			check: "slice:iommu-groups", status: "FAIL"},
		{name: "no kvm in a VM", breaks: func(h *host) {
			h.remove("dev/kvm")
			h.stub("systemd-detect-virt", `echo qemu`)
		}, check: "slice:kvm", status: "WARN", detail: []string{"qemu virtual machine", "absent hardware"}},
		{name: "no IOMMU groups in a VM", breaks: func(h *host) {
			h.remove("sys/kernel/iommu_groups")
			h.stub("systemd-detect-virt", `echo kvm`)
		}, check: "slice:iommu-groups", status: "WARN", detail: []string{"kvm virtual machine"}},
		{name: "no kvm on bare metal", breaks: func(h *host) {
			h.remove("dev/kvm")
			h.stub("systemd-detect-virt", `echo none; exit 1`)
		}, check: "slice:kvm", status: "FAIL"},
		{name: "vfio-pci loadable at stage image", stage: "image", breaks: func(h *host) {
			h.remove("sys/module/vfio_pci")
			h.stub("modprobe", `[ "$1" = -n ] && exit 0; exit 1`)
		}, check: "slice:vfio:vfio-pci", status: "WARN", detail: []string{"loadable, not loaded"}},
		{name: "vfio-pci loadable at stage converged", breaks: func(h *host) {
			h.remove("sys/module/vfio_pci")
			h.stub("modprobe", `[ "$1" = -n ] && exit 0; exit 1`)
		}, check: "slice:vfio:vfio-pci", status: "FAIL", detail: []string{"loadable, not loaded"}, fix: []string{"modules-load.d"}},
		{name: "vfio-pci not loadable", stage: "image", breaks: func(h *host) { h.remove("sys/module/vfio_pci") },
			check: "slice:vfio:vfio-pci", status: "FAIL", detail: []string{"neither loaded nor loadable"}},
		{name: "iommu kernel arg not booted", breaks: func(h *host) { h.file("proc/cmdline", "ro intel_iommu=on\n") },
			check: "kernel-arg:iommu=pt:cmdline", status: "FAIL"},
	} {
		for _, awk := range awks() {
			t.Run(tc.name+"/"+awk, func(t *testing.T) {
				t.Parallel()
				h := convergedHost(t, awk)
				tc.breaks(h)
				o := h.run(profilesManifest(), "--profile=slice", "--stage="+or(tc.stage, "converged"))
				l := o.expect(t, tc.check, tc.status, tc.detail...)
				for _, f := range tc.fix {
					if !strings.Contains(l.remediation, f) {
						t.Errorf("remediation %q lacks %q", l.remediation, f)
					}
				}
				want := slices.Clone(tc.others)
				if tc.status == "FAIL" {
					want = append(want, tc.check)
				}
				got := o.failed()
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("failed %v, want %v:\n%s", got, want, o.out)
				}
				if wantCode := map[bool]int{true: 1, false: 0}[len(want) > 0]; o.code != wantCode {
					t.Errorf("exit %d, want %d", o.code, wantCode)
				}
			})
		}
	}
}

func TestConvergedBareMetal(t *testing.T) {
	t.Parallel()
	h := convergedHost(t, "awk")
	o := h.run(profilesManifest(), "--profile", "bare-metal", "--stage", "converged")
	if o.code != 0 {
		t.Fatalf("exit %d:\n%s", o.code, o.out)
	}
	o.expect(t, "done-marker:h200-ib.done", "PASS")
	o.expect(t, "service-active:docker", "PASS")
	for _, prefix := range []string{"slice:", "fabric:", "bridge:", "dhcp:", "done-marker:h200-slice-vm"} {
		if got := o.with(prefix); len(got) > 0 {
			t.Errorf("bare-metal runs %+v", got)
		}
	}
	h.remove(ibDone)
	o = h.run(profilesManifest(), "--profile", "bare-metal", "--stage", "converged")
	l := o.expect(t, "done-marker:h200-ib.done", "FAIL", "bare-metal host baseline is incomplete")
	if strings.Contains(l.remediation, "composes") {
		t.Errorf("the marker is the profile's own bootstrap's: %q", l.remediation)
	}
}

func TestStageImageLeavesTheBaselineOut(t *testing.T) {
	t.Parallel()
	h := convergedHost(t, "awk")
	h.remove(ibDone)
	o := h.run(profilesManifest(), "--profile", "slice")
	if o.code != 0 || o.summary["stage"] != "image" {
		t.Fatalf("exit %d:\n%s", o.code, o.out)
	}
	for _, prefix := range []string{"done-marker:", "fabric:", "bridge:", "dhcp:", "service-active:dnsmasq"} {
		if got := o.with(prefix); len(got) > 0 {
			t.Errorf("stage image runs %+v", got)
		}
	}
	o.expect(t, "service-active:libvirtd", "PASS")
	o.expect(t, "slice:kvm", "PASS")
}

func TestNoConvergedBaseline(t *testing.T) {
	t.Parallel()
	m := profilesManifest()
	m.Validation.Profiles = m.Validation.Profiles[1:]
	o := convergedHost(t, "awk").run(m, "--profile", "bare-metal", "--stage", "converged")
	o.expect(t, "converged-baseline", "WARN", "no converged baseline for profile bare-metal")
	if o.code != 0 {
		t.Errorf("exit %d", o.code)
	}
}

// Offline, what needs a running host WARNs; files are read under the root.
func TestConvergedOffline(t *testing.T) {
	t.Parallel()
	h := convergedHost(t, "awk")
	o := h.run(profilesManifest(), "--root", h.root, "--profile", "slice", "--stage", "converged")
	for check, status := range map[string]string{
		"slice:kvm": "WARN", "slice:vfio:vfio": "WARN", "fabric:address": "WARN", "fabric:route": "WARN",
		"bridge:ovsbr0": "WARN", "dhcp:dnsmasq": "WARN", "done-marker:h200-ib.done": "PASS", "fabric:netplan": "PASS",
	} {
		o.expect(t, check, status)
	}
	if o.code != 0 {
		t.Errorf("exit %d:\n%s", o.code, o.out)
	}
}

func TestProfileAndStageArguments(t *testing.T) {
	t.Parallel()
	h := convergedHost(t, "awk")
	m := profilesManifest()
	for _, tc := range []struct {
		args           []string
		profile, stage string
	}{
		{nil, "bare-metal", "image"},
		{[]string{"--profile", "slice"}, "slice", "image"},
		{[]string{"--profile=slice", "--stage=converged"}, "slice", "converged"},
		{[]string{"--stage", "converged", "--profile", "bare-metal"}, "bare-metal", "converged"},
	} {
		o := h.run(m, tc.args...)
		if o.summary["profile"] != tc.profile || o.summary["stage"] != tc.stage || o.code != 0 {
			t.Errorf("%v: exit %d, summary %v", tc.args, o.code, o.summary)
		}
	}
	m.Validation.DefaultProfile, m.Validation.DefaultStage = "slice", "converged"
	if o := h.run(m); o.summary["profile"] != "slice" || o.summary["stage"] != "converged" {
		t.Errorf("recipe defaults: summary %v", o.summary)
	}
	if o := h.run(m, "--profile", "bare-metal"); o.summary["profile"] != "bare-metal" || o.summary["stage"] != "converged" {
		t.Errorf("override: summary %v", o.summary)
	}
	for _, args := range [][]string{{"--profile", "vm"}, {"--profile=*"}, {"--stage", "deployed"}, {"--profile"}, {"--stage="}, {"--bogus"}} {
		o := h.run(m, args...)
		if o.code != 2 || o.out != "" || o.stderr == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, o.code, o.out, o.stderr)
		}
	}
	o := h.run(m, "-h")
	for _, want := range []string{"--profile bare-metal|slice", "--stage image|converged", "--root DIR", "remediation=TEXT", "default slice"} {
		if o.code != 0 || !strings.Contains(o.out, want) {
			t.Errorf("help lacks %q (exit %d):\n%s", want, o.code, o.out)
		}
	}
}

func TestScriptRefusesBadRecipes(t *testing.T) {
	t.Parallel()
	for name, breakIt := range map[string]func(m *manifest.Manifest){
		"default profile":    func(m *manifest.Manifest) { m.Validation.DefaultProfile = "vm" },
		"default stage":      func(m *manifest.Manifest) { m.Validation.DefaultStage = "booted" },
		"profile name":       func(m *manifest.Manifest) { m.Validation.Profiles[0].Name = "baremetal" },
		"profile twice":      func(m *manifest.Manifest) { m.Validation.Profiles[0].Name = "slice" },
		"fabric subnet":      func(m *manifest.Manifest) { m.Validation.Profiles[1].Converged.Fabric.Subnet = "192.168.0.0" },
		"fabric IPv6 subnet": func(m *manifest.Manifest) { m.Validation.Profiles[1].Converged.Fabric.Subnet = "fd00::/64" },
		"fabric interface":   func(m *manifest.Manifest) { m.Validation.Profiles[1].Converged.Fabric.Interface = "" },
		"bridge address":     func(m *manifest.Manifest) { m.Validation.Profiles[1].Converged.Bridges[0].Address = "ovsbr0" },
		"dhcp":               func(m *manifest.Manifest) { m.Validation.Profiles[1].Converged.DHCP.SubnetFile = "" },
	} {
		m := profilesManifest()
		breakIt(m)
		if _, err := Script(m); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The script carries no value of the runbooks but what the recipe gave.
func TestScriptHardCodesNoSiteValues(t *testing.T) {
	t.Parallel()
	for _, lib := range shLibs {
		for _, v := range []string{"192.168", "10.100", "ibp", "ovsbr0", "dnsmasq", "h200", "gpuaas", "19998", "60-ipoib"} {
			if strings.Contains(lib, v) {
				t.Errorf("the script's functions name %q", v)
			}
		}
	}
}

func TestCIDRInside(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix, subnet string
		in             bool
	}{
		{"192.168.13.11", "192.168.0.0/16", true},
		{"192.168.0.0/16", "192.168.0.0/16", true},
		{"192.168.255.255", "192.168.0.0/16", true},
		{"192.168.13.0/24", "192.168.0.0/16", true},
		{"192.169.0.0", "192.168.0.0/16", false},
		{"192.167.255.255", "192.168.0.0/16", false},
		{"192.0.0.0/8", "192.168.0.0/16", false},
		{"10.100.0.7", "10.100.0.0/24", true},
		{"10.100.1.7", "10.100.0.0/24", false},
		{"8.8.8.8", "0.0.0.0/0", true},
		{"10.0.0.1", "10.0.0.1/32", true},
		{"10.0.0.2", "10.0.0.1/32", false},
		{"default", "192.168.0.0/16", false},
		{"192.168.1", "192.168.0.0/16", false},
		{"192.168.1.300", "192.168.0.0/16", false},
		{"", "192.168.0.0/16", false},
	} {
		for _, awk := range awks() {
			h := newHost(t, awk)
			cmd := exec.Command("sh", "-c", shConverged+"\ncidr_inside \"$1\" \"$2\"", "sh", tc.prefix, tc.subnet)
			cmd.Env = []string{"PATH=" + h.bin}
			err := cmd.Run()
			if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
				t.Fatal(err)
			}
			if got := err == nil; got != tc.in {
				t.Errorf("%s: cidr_inside %s %s = %v", awk, tc.prefix, tc.subnet, got)
			}
		}
	}
}

// libvirtd exits after 120 s without clients (--timeout 120 in Debian's and
// Ubuntu's unit) and its sockets start it again: inactive with a listening
// trigger socket is ready; failed, or no socket listening, is not.
func TestSocketActivatedServiceIdle(t *testing.T) {
	t.Parallel()
	var others []string
	for _, u := range sliceUnits {
		if u != "libvirtd" {
			others = append(others, u)
		}
	}
	// The subtests run in parallel and each appends to others: clip it so
	// every append copies instead of writing into one shared spare slot.
	others = slices.Clip(others)
	for _, c := range []struct {
		name    string
		setup   func(h *host)
		status  string
		details []string
	}{
		{"socket listens", func(h *host) {
			h.active(append(others, "libvirtd.socket")...)
			h.triggers("libvirtd", "libvirtd-admin.socket", "libvirtd-ro.socket", "libvirtd.socket")
		}, "PASS", []string{"inactive while idle", "libvirtd.socket listens"}},
		{"no socket listens", func(h *host) {
			h.active(others...)
			h.triggers("libvirtd", "libvirtd-ro.socket", "libvirtd.socket")
		}, "FAIL", []string{"inactive"}},
		{"not socket activated", func(h *host) {
			h.active(append(others, "libvirtd.socket")...)
		}, "FAIL", []string{"inactive"}},
		{"started by a timer", func(h *host) {
			h.active(append(others, "libvirtd.timer")...)
			h.triggers("libvirtd", "libvirtd.timer")
		}, "FAIL", []string{"inactive"}},
		{"failed", func(h *host) {
			h.active(append(others, "libvirtd.socket")...)
			h.failed("libvirtd")
			h.triggers("libvirtd", "libvirtd.socket")
		}, "FAIL", []string{"failed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := convergedHost(t, "awk")
			c.setup(h)
			o := h.run(profilesManifest(), "--profile", "slice", "--stage", "converged")
			o.expect(t, "service-active:libvirtd", c.status, c.details...)
			if c.status == "PASS" && (o.code != 0 || len(o.failed()) > 0) {
				t.Errorf("exit %d:\n%s%s", o.code, o.out, o.stderr)
			}
		})
	}
}

package validate

// Milestones of a first boot, in the order a boot usually reaches them:
// the names imagectl smoke's timeline and the validation script's result
// (Result.Timeline) share, so a smoke boot and a real deploy compare.
const (
	// MilestoneQEMUStart is when the host started QEMU (smoke only).
	MilestoneQEMUStart = "qemu-start"
	// MilestoneLoader is when the boot loader started, as the loader told
	// systemd (LoaderTimestampMonotonic): before the kernel, negative.
	// Only loaders that implement the Boot Loader Interface (systemd-boot)
	// report it; GRUB does not.
	MilestoneLoader = "loader"
	// MilestoneKernel is when the kernel started: smoke sees its banner on
	// the console; on a host it is the zero of the clock.
	MilestoneKernel = "kernel"
	// MilestoneUserspace is when systemd started on the real root
	// (UserspaceTimestampMonotonic): kernel and initramfs are behind.
	MilestoneUserspace = "userspace"
	// MilestoneCloudInitStart is when cloud-init's first stage began
	// (cloud-init-local.service left inactive).
	MilestoneCloudInitStart = "cloud-init-start"
	// MilestoneMultiUser is when multi-user.target was reached.
	MilestoneMultiUser = "multi-user"
	// MilestoneBootstrapStart and MilestoneBootstrapDone bracket the site
	// bootstrap that user-data runs at stage converged.
	MilestoneBootstrapStart = "bootstrap-start"
	MilestoneBootstrapDone  = "bootstrap-done"
	// MilestoneCloudInitDone is when cloud-init's last stage ended
	// (cloud-final.service's process exited).
	MilestoneCloudInitDone = "cloud-init-done"
	// MilestoneBootFinished is when systemd's boot jobs were all done
	// (FinishTimestampMonotonic, the end of systemd-analyze's total).
	MilestoneBootFinished = "boot-finished"
	// MilestoneValidationStart and MilestoneValidationDone bracket the
	// image's validation script.
	MilestoneValidationStart = "validation-start"
	MilestoneValidationDone  = "validation-done"
)

// Milestones are the milestone names in the order a boot usually reaches
// them.
var Milestones = []string{
	MilestoneQEMUStart, MilestoneLoader, MilestoneKernel, MilestoneUserspace, MilestoneCloudInitStart,
	MilestoneMultiUser, MilestoneBootstrapStart, MilestoneBootstrapDone, MilestoneCloudInitDone,
	MilestoneBootFinished, MilestoneValidationStart, MilestoneValidationDone,
}

// Where the validation script's milestones come from (Milestone.Source).
const (
	// SourceSystemd: a systemd monotonic timestamp (systemctl show, what
	// systemd-analyze reads).
	SourceSystemd = "systemd"
	// SourceCloudInit: cloud-init's own record (cloud-init analyze dump,
	// /var/lib/cloud/data/status.json).
	SourceCloudInit = "cloud-init"
	// SourceMarker: the site bootstrap's done-markers, by their mtime.
	SourceMarker = "marker"
	// SourceScript: the script's own reading of /proc/uptime.
	SourceScript = "script"
)

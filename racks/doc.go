// Package racks owns the check that every rack controller of a MAAS site
// can serve a version's root image to deploying machines, and the warming
// of their caches that the same check does.
//
// For each rack controller the MAAS API lists, it picks the addresses
// machines use (its links on the VLANs where it serves DHCP, else all its
// addresses), checks its services (rackd, http, and from 3.5 the agent),
// then fetches the image through the rack's :5248 exactly as curtin will:
// one plain GET, no Range, no authentication, counted and never held
// whole, each rack's stream compared with a local copy of the version
// when the caller has one (Target.Local), which is hashed once; else,
// with two racks or more at once, compared with the bytes the first rack
// to reach them lent to a ring of a few MiB, which are hashed once
// (convoy); else read through sha256. The URL is
// /images/<filename_on_disk>/custom/<arch>/<subarch>/<series>/uploaded/<filename>
// from 3.5 (the agent's caching proxy fills its cache only on such a full
// read, so the check warms the rack for the mass deploy), and on 3.4
// /images/custom/<arch>/<subarch>/<series>/uploaded/<filename> from the
// rack's own imported copy, after its image list (list_boot_images) and
// an import on demand.
//
// A rack passes only on a 200 whose size and sha256 match; it fails,
// naming the rack and the digest got and wanted, on other bytes (more
// than the size is never read), an error status, a service MAAS says is
// dead or off (degraded ones are fetched anyway, with a note), or a rack
// that stalls or is still serving when the time runs out; it is unknown,
// never passed, when the checking host cannot reach it, or the time ran
// out before it was reached or started. Racks are checked in parallel
// (bounded), one fill per rack and file at a time (across the checks of
// one process), within a timeout, and stop with the context. It reads MAAS through upload/maas and knows no store:
// release supplies the digest a version must have.
package racks

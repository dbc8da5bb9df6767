// Package racks owns the check that every rack controller of a MAAS site
// can serve a version's root image to deploying machines, and the warming
// of their caches that the same check does.
//
// For each rack controller the MAAS API lists, it picks the addresses
// machines use (its links on the VLANs where it serves DHCP, else all its
// addresses), checks its services (rackd, http, and from 3.5 the agent),
// then fetches the image through the rack's :5248 exactly as curtin will:
// one plain GET, no Range, no authentication, streamed through sha256 and
// a byte count and never held whole. The URL is
// /images/<filename_on_disk>/custom/<arch>/<subarch>/<series>/uploaded/<filename>
// from 3.5 (the agent's caching proxy fills its cache only on such a full
// read, so the check warms the rack for the mass deploy), and on 3.4
// /images/custom/<arch>/<subarch>/<series>/uploaded/<filename> from the
// rack's own imported copy, after its image list (list_boot_images) and
// an import on demand.
//
// A rack passes only on a 200 whose size and sha256 match; it fails,
// naming the rack and the digest got and wanted, on other bytes, an error
// status or a service that is not running; it is unknown, never passed,
// when the checking host cannot reach it. Racks are checked in parallel
// (bounded), one fill per rack at a time, within a timeout, and stop with
// the context. It reads MAAS through upload/maas and knows no store:
// release supplies the digest a version must have.
package racks

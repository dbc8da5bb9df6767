// Package maassim is an in-process MAAS 2.0 API server for tests and
// benchmarks, used like net/http/httptest: New starts it on loopback, URL
// is its MAAS root, AdminKey and UserKey are API keys, Close stops it.
//
// It implements the boot-resources part of the API as MAAS itself does
// (src/maasserver/api/boot_resources.py in https://github.com/canonical/maas,
// branches 2.9 to 3.8; the API is documented at
// https://canonical.com/maas/docs/api): OAuth PLAINTEXT with the 300 s
// timestamp window and nonce reuse refused, admin-only mutations,
// create-parameter validation with MAAS's error bodies and statuses (400
// with a JSON object of field errors, or text), name normalization
// ("custom/" stripped up to 3.7), set versions (YYYYmmdd, then
// YYYYmmdd.N), sequential chunk appends with Content-Length required, the
// sha256 check on the last chunk (a mismatch leaves the file stuck), the
// 3.5+ lag of "complete" (synced to every region), nginx's 413 for inline
// bodies over 10 MB from 3.2, and GET/DELETE/list with the type filter.
// Options.Version switches between MAAS 2.9, 3.4, 3.5, 3.7 (the default)
// and 3.8 behaviour.
//
// Concurrent clients see what they would see of MAAS (3.5+, as
// BootResourcesHandler.create and BootResourceFileUploadHandler.update
// implement it): a create of a name that exists adds a new set to the same
// resource (BootResource get_or_create) and, without keep_old, deletes the
// files of its older sets, so another client's file in flight is gone and
// its next chunk gets 404; chunks to one file are appended one after the
// other at the offset the server counts at that moment (MAAS reads the
// body, then appends in a serializable transaction retried on conflict),
// so two clients appending to one file interleave, and a chunk that would
// go past the file's size gets "Too much data received."; a file created
// with the sha256 of a verified file is complete at once (files are
// stored by sha256).
//
// Uploaded bytes are never kept in memory: each file holds an incremental
// sha256 state and a byte count, so a multi-GiB upload costs no memory
// (with racks, the bytes go to a temporary file for them to serve).
//
// Racks (Options.Racks, racks.go) are rack controllers as the API lists
// them (rackcontrollers/ with addresses, interfaces on DHCP VLANs and
// services, fabrics/, version/, and 3.4's list_boot_images and
// import_boot_images), each with a real HTTP server of its own on a
// loopback address (127.0.0.N, one port for all: RackPort) that serves
// /images/<filename_on_disk>/... as the 3.5+ agent does: a cold file is a
// MISS filled only by a full 200 read to the end, a Range on it is a 206
// that warms nothing, a cached one is a HIT that serves Range; a rack
// may be unable to reach its region (502), have its agent stopped (503,
// and its service_set says so), say its rackd is degraded while it
// serves, be unreachable (nothing listens) or serve
// other bytes. On 3.4 racks serve /images/custom/<arch>/<subarch>/<series>/uploaded/<file>
// from copies they import when asked. With racks, uploaded bytes are kept
// on disk for them; Seed adds a large file without uploading it.
//
// Inject adds faults per request kind (internal/simfault schedules them): a
// timeout after the request was applied, a 503, a connection dropped
// mid-chunk, a corrupted chunk, a refusal with a status and body of the
// test's choosing.
package maassim

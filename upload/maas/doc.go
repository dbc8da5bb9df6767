// Package maas is imagectl's client of the MAAS 2.0 boot-resources API
// (https://canonical.com/maas/docs/api): list, get, find and delete boot
// resources, and upload a custom image the way MAAS's own CLI does: create
// the resource (POST boot-resources/ with name, architecture, base_image,
// filetype, sha256 and size, which makes an empty file record), then append
// the file in 4 MiB chunks read at offsets from the image (a file, or a store's tgz streamed from a registry; PUT to the file's upload_uri),
// each signed at send time with an explicit Content-Length.
//
// The MAAS behaviour it relies on, as MAAS 2.9 to 3.8 implement it
// (src/maasserver/api/boot_resources.py in https://github.com/canonical/maas):
// OAuth PLAINTEXT signatures whose timestamp must be within 300 s and whose
// nonce may not repeat, so every request and chunk is signed just before it
// is sent; a chunk without Content-Length is refused, and chunks are
// appended at the server's own offset, so they go strictly in order; the
// last chunk makes MAAS hash the whole file within that request (hence a
// long timeout), and a mismatch leaves the file stuck until the resource is
// deleted; from 3.5 "complete" means synced to every region, so it lags the
// last chunk; MAAS's list ignores gomaasclient's "Type" filter, so the
// lowercase type parameter is sent here; and a name's "custom/" prefix is
// stripped up to 3.7.
//
// Upload is safe under faults: it skips what MAAS already holds, treats a
// timeout on create or on the last chunk as an unknown outcome and decides
// from the resource's state, deletes and restarts (a bounded number of
// times) a file MAAS stuck on a hash mismatch or whose offset is unknown,
// and backs off on 503s and connection errors.
//
// Two uploaders of the same image to one MAAS (two promotions at once)
// end with one complete resource: MAAS replaces a resource's files when the
// name is created again and appends every chunk at its own offset, so
// neither may create over, append to or delete a file the other is
// sending. An uploader that finds the image's file incomplete waits while
// it grows (Config.StallTimeout), one whose file went (404) or whose
// offset is not its own looks the resource up and waits likewise, and
// only a file that stalled, or one of its own that MAAS stuck on a hash
// mismatch, is deleted; never one complete with the image's sha256. MAAS
// has no conditional delete, so a create landing between the last look
// and a delete can still be lost: the loser then starts again. It reports progress
// through an Events callback and never prints.
//
// For the check that racks serve a version (the racks package) it also
// reads the MAAS version, the rack controllers with their interfaces and
// services, the fabrics with their VLANs, and on 3.4 a rack's own image
// list, and asks a 3.4 rack to import images (racks.go).
//
// gomaasclient provides the OAuth signer and the GET/DELETE calls; the
// create and chunk requests, which it cannot make (its create is a stub and
// its file upload buffers the whole file), are this package's own.
package maas

// Package maas is imagectl's client of the MAAS 2.0 boot-resources API:
// list, get, find and delete boot resources, and upload a custom image the
// way MAAS requires (shared/reference/maas-upload-api.md): create the
// resource with sha256 and size, then append 4 MiB chunks read from disk,
// each signed at send time with an explicit Content-Length.
//
// Upload is safe under faults: it skips what MAAS already holds, treats a
// timeout on create or on the last chunk as an unknown outcome and decides
// from the resource's state, deletes and restarts (a bounded number of
// times) a file MAAS stuck on a hash mismatch or whose offset is unknown,
// and backs off on 503s and connection errors. It reports progress
// through an Events callback and never prints.
//
// gomaasclient provides the OAuth signer and the GET/DELETE calls; the
// create and chunk requests, which it cannot make, are this package's own.
package maas

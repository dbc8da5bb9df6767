// Package maassim is an in-process MAAS 2.0 API server for tests and
// benchmarks, used like net/http/httptest: New starts it on loopback, URL
// is its MAAS root, AdminKey and UserKey are API keys, Close stops it.
//
// It implements the boot-resources part of the API as MAAS itself does
// (see shared/reference/maas-upload-api.md): OAuth PLAINTEXT with the 300 s
// timestamp window and nonce reuse, admin-only mutations, create-parameter
// validation with MAAS's error bodies and statuses, name normalization,
// set versions, sequential chunk appends with Content-Length required, the
// sha256 check on the last chunk (a mismatch leaves the file stuck), the
// 3.5+ lag of "complete", nginx's 413 for large inline bodies, and
// GET/DELETE/list with the type filter. Options.Version switches between
// MAAS 2.9, 3.4, 3.5, 3.7 (the default) and 3.8 behaviour.
//
// Uploaded bytes are never kept: each file holds an incremental sha256
// state and a byte count, so a multi-GiB upload costs no memory.
//
// Inject adds faults per request kind: a timeout after the request was
// applied, a 503, a connection dropped mid-chunk, a corrupted chunk.
package maassim

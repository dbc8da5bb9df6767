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
// Uploaded bytes are never kept: each file holds an incremental sha256
// state and a byte count, so a multi-GiB upload costs no memory.
//
// Inject adds faults per request kind (internal/simfault schedules them): a
// timeout after the request was applied, a 503, a connection dropped
// mid-chunk, a corrupted chunk.
package maassim

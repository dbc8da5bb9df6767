package sbom

// Bounds on what Scan reads of one file. Variables, not constants, so that
// tests can make them small.
var (
	// statusLimit is the largest dpkg status file Scan reads; a larger one
	// is refused.
	statusLimit int64 = 64 << 20
	// textLimit is how much of a copyright, os-release or apt sources file
	// Scan reads; the rest is not read.
	textLimit int64 = 1 << 20
	// lineLimit is the longest line Scan parses; a longer one is skipped.
	lineLimit = 64 << 10
)

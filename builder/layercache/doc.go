// Package layercache keeps the disk state after each layer of a build, keyed
// by the layer's chained cache key, so that a rebuild starts from the
// deepest unchanged layer and applies only what changed.
//
// A snapshot is stored as a delta against its parent's state: the disk is
// cut into fixed-size clusters, a table holds the sha256 of every cluster,
// and the delta holds only the clusters whose hash differs from the parent's
// table (a sparse file, written at their offsets). Restoring a chain copies
// those clusters onto the base disk in order and checks each one against
// its table, so a corrupted or half-written snapshot is detected, not used.
// Entries are written into a temporary directory and renamed into place,
// which makes concurrent builds safe: the first to finish wins, the other's
// identical entry is dropped.
package layercache

// Package layering owns the module's import fence: its test holds the
// table of layers every package of the module belongs to, bottom to top,
// and fails when a package imports one of a higher layer, a sibling of its
// own layer, the CLI, or a test-only helper outside tests, in the untagged
// and the guestfs-tagged builds and in test files alike, or when a package
// is missing from the table. It has no code: a new package is placed by
// adding it to the table in layering_test.go.
package layering

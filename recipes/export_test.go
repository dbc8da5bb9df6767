package recipes

// Unprintable is unprintable (diagnostics_test.go), for the external test
// package.
var Unprintable = unprintable

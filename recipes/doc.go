// Package recipes owns the imagectl recipe language: the HCL schema of
// recipes and reusable layer files, the decoding of both into plain Go values
// (Recipe, Image, Layer, ...), variable resolution (defaults, -var, var files,
// IMAGECTL_VAR_* environment), the functions a recipe may call, canonical
// formatting, and the rendering of diagnostics with file:line:col and a
// snippet.
//
// Everything a recipe can get wrong is reported as an hcl.Diagnostic with a
// source range, and all of them are collected before the caller sees them.
// The package never reads a base image or touches a disk: what a recipe
// compiles to is the business of package layers, and what a build runs is the
// business of package builder.
package recipes

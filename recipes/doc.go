// Package recipes owns the imagectl recipe language: the HCL schema of
// recipes and reusable layer files, the decoding of both into plain Go values
// (Recipe, Image, Layer, ...), variable resolution (defaults, -var, var files,
// IMAGECTL_VAR_* environment), the functions a recipe may call, and
// canonical formatting.
//
// It also owns which files a recipe may read (paths.go) and where a path
// comes from (origin.go): what a recipe names by itself is relative to the
// file that names it and held to its tree (--root allows more), while a path
// the user typed (-var, var files, IMAGECTL_VAR_*) is relative to the working
// directory and theirs. For a dry run (Options.DryRun) a bundle whose source
// needs a variable without a value is left unresolved rather than failing.
// A bundle's source is read here too: listed and digested when the recipe
// loads, and read again for the executors that stage it (CopyBundle: the
// build's tar stream and the first-boot script), checked against that
// listing.
//
// Everything a recipe can get wrong is reported as an hcl.Diagnostic with a
// source range, and all of them are collected before the caller sees them.
// The package never reads a base image or touches a disk: what a recipe
// compiles to is the business of package builder/compile, and what a build
// runs is the business of package builder.
//
// No input may take imagectl down. Every byte a user gives that reaches an
// HCL parser passes the guard of internal/hclkit (ReadInput, ParseConfig,
// ParseExpression, ParseTemplate), which refuses input larger than 1 MiB or
// nested deeper than 256 levels with a diagnostic. Values are converted in
// time linear in their size (convertValue, also for the arguments of the
// functions a recipe calls), where go-cty's own conversion of a written-out
// list compares every pair of elements. What a recipe makes and reads is
// bounded as well (bounds.go): a function call whose result would pass 16
// MiB, or whose format width or indent asks for gigabytes, fails saying so,
// and files a recipe reads into memory (templates, keys, file sources,
// file()) are refused past their bound without being read further;
// filesha256 and fileexists read nothing into memory. Parser.Load returns as
// soon as its context ends, even while a read blocks or a parse runs.
// Diagnostics are rendered by hclkit.WriteDiagnostics and
// hclkit.DiagnosticsJSON, shared with the sites file.
package recipes

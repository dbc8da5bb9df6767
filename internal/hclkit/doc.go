// Package hclkit is the HCL toolkit under imagectl's two languages,
// recipes (package recipes) and sites files (package sites), as packer
// keeps one parser with its languages on top. It owns what they share:
//
//   - bounded input: every byte a user gives that reaches an HCL parser
//     (recipes, layer files, var files, -var and IMAGECTL_VAR_* values
//     parsed as HCL, templates, sites.hcl) is read by ReadInput and parsed
//     by ParseConfig, ParseExpression or ParseTemplate, which pass one
//     guard first, checkInput: it refuses input larger than MaxInputSize
//     (1 MiB; files are not read past it, a device is refused, a pipe is
//     read until closed but refused after PipeWait without input) or
//     nested deeper than MaxNesting levels (hclsyntax parses and evaluates
//     by recursion, and deeper input exhausts the stack, which no recover
//     catches);
//   - did-you-mean suggestions for misspelt names (Suggest), and the error
//     diagnostic about a source range both decoders build (ErrorAt);
//   - diagnostic rendering, as text with file:line:col and a snippet
//     (WriteDiagnostics) and as JSON (DiagnosticsJSON): at most
//     MaxDiagnostics shown, the rest counted, and control characters and
//     invalid UTF-8 from the input escaped.
//
// What a language means (its schemas, decoders and messages) is its own
// package's, and so is attribute decoding: a recipe's attributes are
// expressions evaluated with variables and functions, converted to their
// types and marked with where their values came from, while a sites file
// holds literals only and never quotes a value it refuses (any may be a
// secret), so the two share these primitives rather than one decoder.
package hclkit

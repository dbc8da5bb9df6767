// Package hostcheck owns running an image's baked validation script on
// deployed hosts over the user's OpenSSH client: the ssh command line
// (BatchMode, a connect timeout, the user's ssh config and -o options
// honoured, host names passed as arguments, never through a shell), hosts
// in parallel within a bound, each host's output read within
// validate.MaxResult and parsed as a validate.Result, and why a host gave
// none. It records nothing and knows no store: release checks the results
// against the store and records them.
package hostcheck

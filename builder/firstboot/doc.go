// Package firstboot owns the plan's third executor: the compiled steps
// (package steps, in package compile's layers) as a POSIX sh script that a
// host booted from the recipe's base image runs at first boot, as root, to
// do what a build bakes in ("generic image + first-boot install"), and that
// script wrapped into NoCloud user-data.
//
// Each kind of step has one entry in one switch (executor): whether it runs
// at first boot and why not or what differs (At, which the plan's
// renderings show), and the shell that runs it. The script's functions are
// in sh/lib.sh, embedded. Every value enters the script through
// shell.Quote; file contents are embedded and checked against the plan's
// sha256 on the host. Whether a script carries a sensitive value is
// decided here, on the raw values (Result.Sensitive), and so is the mode of
// its file; a bundle is staged only inside its destination, never through
// a symlink. Console reads the script's lines back from a console or log
// (its result line and time lines are this package's format).
package firstboot

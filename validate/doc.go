// Package validate owns the on-host validation script: the POSIX sh script
// generated from a build manifest (baked into the image and written beside
// it) that checks a host, or an unpacked root filesystem, against its image
// for one deploy profile at one stage. The script's functions are the shell
// files under sh/; Script writes the header and the calls to them. It also
// owns the script's result document (Result, ParseResult: what --json
// prints and a host keeps under StateDir) and the first-boot milestone names
// (Milestones) that the result's timeline and smoke's share. The
// deployability check of a tgz is package deploycheck's.
package validate

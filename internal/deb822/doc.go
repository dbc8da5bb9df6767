// Package deb822 reads Debian's control-file format (deb822, RFC 822
// style paragraphs): dpkg's status file, apt's .sources files, apt-cache
// show's records. It reads a stream line by line within a bound on a
// line's length, never buffering a longer line, so that what it is given
// need not be trusted.
package deb822

// Package tgztest writes the small gzip'd tars that tests hand to what reads
// an image's tgz (the deploy check, the SBOM scan, signing's artifact,
// imagectl check): the entries given, in their order, with fixed modes and
// no times, so the same entries always make the same bytes. Only tests
// import it.
package tgztest

// Package debcache owns the package cache: the .deb files a build's
// packages steps install, fetched on the host, in parallel, into a
// content-addressed store in the cache directory (internal/cachedir's
// Packages folder), keyed by the sha256 the signed apt index gives. It
// parses what the guest's apt says it will fetch (apt-get install
// --print-uris, apt-cache show), fetches through the host's proxy settings
// (http_proxy, https_proxy, no_proxy of the environment it is given),
// checks every byte against its sha256 while streaming, resumes a partial
// download with a Range request, and makes an entry appear only complete
// (a temporary file renamed), so a failure or Ctrl-C never leaves a partial
// entry. It lists and removes entries for cache/'s listing and pruning.
package debcache

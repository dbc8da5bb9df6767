# Shared helpers of the demo site bootstrap.
log() {
	printf 'site-bootstrap demo: %s\n' "$*" >&2
}

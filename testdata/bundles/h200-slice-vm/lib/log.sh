# Logging helpers for the test bundle.
log() { printf 'h200-slice-vm: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

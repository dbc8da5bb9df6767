#!/bin/sh
# A stand-in nvidia-smi that replays a captured fixture (see README.md).
#   NVSMI_FIXTURE  the fixture directory: its query-gpu-all.tsv (every field of one GPU:
#                  field, csv header, value, value with nounits) or, without one, its
#                  nvsmi-query.csv (a header and one GPU's row, values with units)
#   NVSMI_GPUS     how many GPUs to replay the fixture's GPU as (default 1), indexed 0..N-1
#   NVSMI_EDITS    edits to what it replays, one a line: "INDEX FIELD VALUE" (INDEX * for
#                  every GPU; a GPU's own line wins)
#   NVSMI_FAIL     when set, fails as nvidia-smi does without a working driver (exit 9)
# It answers --query-gpu=FIELDS --format=csv,noheader[,nounits] and nothing else; a field
# the fixture lacks fails as an unknown field does (exit 2), before any row is printed.
set -eu
fixture=${NVSMI_FIXTURE:?NVSMI_FIXTURE is not set}
if [ -n "${NVSMI_FAIL:-}" ]; then
	echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
	exit 9
fi
fields='' format=''
for arg; do
	case $arg in
	--query-gpu=*) fields=${arg#*=} ;;
	--format=*) format=${arg#*=} ;;
	*)
		echo "replay: $arg is not replayed" >&2
		exit 64
		;;
	esac
done
case $format in
csv,noheader) nounits=0 ;;
csv,noheader,nounits) nounits=1 ;;
*)
	echo "replay: --format=$format is not replayed" >&2
	exit 64
	;;
esac
[ -n "$fields" ] || {
	echo "replay: no --query-gpu" >&2
	exit 64
}

# table prints "FIELD<TAB>VALUE" for the fixture's GPU.
table() {
	if [ -f "$fixture/query-gpu-all.tsv" ]; then
		awk -F'\t' -v col=$((3 + nounits)) '{ print $1 "\t" $col }' "$fixture/query-gpu-all.tsv"
		return
	fi
	awk -v nounits="$nounits" '
		NR == 1 { n = split($0, header, /, /) }
		NR == 2 {
			split($0, value, /, /)
			for (i = 1; i <= n; i++) {
				field = header[i]; v = value[i]
				if (sub(/ \[.*\]$/, "", field) && nounits) sub(/ [^ ]*$/, "", v)
				print field "\t" v
			}
		}' "$fixture/nvsmi-query.csv"
}

table | awk -F'\t' -v fields="$fields" -v gpus="${NVSMI_GPUS:-1}" '
	{ value[$1] = $2 }
	END {
		n = split(fields, f, ",")
		for (i = 1; i <= n; i++) {
			if (!(f[i] in value)) {
				printf "Field \"%s\" is not a valid field to query.\n\n", f[i]
				exit 2
			}
		}
		m = split(ENVIRON["NVSMI_EDITS"], lines, "\n")
		for (j = 1; j <= m; j++) {
			if (split(lines[j], w, " ") < 3) continue
			v = lines[j]
			sub(/^ *[^ ]+ +[^ ]+ +/, "", v)
			edit[w[1], w[2]] = v
		}
		for (g = 0; g < gpus; g++) {
			line = ""
			for (i = 1; i <= n; i++) {
				v = f[i] == "index" ? g : value[f[i]]
				if ((g, f[i]) in edit) v = edit[g, f[i]]
				else if (("*", f[i]) in edit) v = edit["*", f[i]]
				line = line (i > 1 ? ", " : "") v
			}
			print line
		}
	}'

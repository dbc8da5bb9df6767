# shellcheck shell=sh
# check_netdata_collectors checks that Netdata's collectors collect: that
# their charts appear in Netdata's /api/v1/charts. A chart names its
# collector in its "plugin" and "module" members (rrdset2json in Netdata's
# web API, as '"plugin": "x"' up to 1.37 and '"plugin":"x"' since): internal
# and external plugins as "<name>.plugin" (cgroups.plugin, apps.plugin,
# proc.plugin), go.d modules by their module ("module": "nvidia_smi" or
# "docker", the plugin being "go.d" or "go.d.plugin").
# validate.Script copies what follows this comment into the generated script
# as it is (see validate/scriptlib.go).

# http_get URL: the body, with curl or wget.
http_get() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsS --max-time 10 "$1"
	else
		wget -q -T 10 -O - "$1"
	fi
}

# netdata_chart_sources: reads /api/v1/charts JSON on stdin and prints
# "plugin|module" for each chart (no jq: the image may lack it). Split at
# the double quotes, a string is a record: a "plugin" or "module" record,
# then one that is only a colon, then the value.
netdata_chart_sources() {
	awk 'BEGIN { RS = "\"" }
		(key == "plugin" || key == "module") && colon ~ /^[ \t\r\n]*:[ \t\r\n]*$/ {
			if (key == "plugin") plugin = $0
			else { print plugin "|" $0; plugin = "" }
		}
		{ key = colon; colon = $0 }'
}

# collector_charts NAME: how many of the charts seen are NAME's.
collector_charts() {
	printf '%s\n' "$ND_SOURCES" | awk -F'|' -v c="$1" '$1 == c ".plugin" || $2 == c { n++ } END { print n + 0 }'
}

# collector_absent NAME: why what NAME collects is not on this host; fails
# when it is (or when NAME is no collector known to depend on hardware or a
# service).
collector_absent() {
	case $1 in
	nvidia_smi)
		if ! command -v nvidia-smi >/dev/null 2>&1; then
			echo "nvidia-smi is not installed: no NVIDIA GPU to collect"
		elif ! nvidia-smi --query-gpu=index --format=csv,noheader >/dev/null 2>&1; then
			echo "nvidia-smi fails: no NVML (no driver, or the GPUs are bound to vfio-pci)"
		else
			return 1
		fi
		;;
	docker)
		docker_state=$(systemctl is-active -- docker 2>/dev/null)
		if [ "$docker_state" != active ] && [ ! -e "$ROOT/run/docker.sock" ] && [ ! -e "$ROOT/var/run/docker.sock" ]; then
			echo "docker is ${docker_state:-unknown} and there is no docker socket: no containers to collect"
		else
			return 1
		fi
		;;
	*) return 1 ;;
	esac
}

# absent_reason NAME: NAME's line of ND_ABSENT.
absent_reason() {
	printf '%s\n' "$ND_ABSENT" | awk -F'|' -v c="$1" '$1 == c { print $2; found = 1 } END { exit !found }'
}

# netdata_waiting NAME...: whether a NAME whose subject is here has no charts yet.
netdata_waiting() {
	for c; do
		[ "$(collector_charts "$c")" -gt 0 ] && continue
		absent_reason "$c" >/dev/null && continue
		return 0
	done
	return 1
}

# netdata_poll URL WAIT NAME...: asks URL/api/v1/charts every second until
# every NAME whose subject is here has charts or WAIT seconds passed, one
# bound for all. Sets ND_SOURCES, and ND_ANSWERED when Netdata answered.
netdata_poll() {
	nd_deadline=$(($(date +%s) + $2))
	nd_api=$1/api/v1/charts
	shift 2
	while :; do
		if nd_json=$(http_get "$nd_api" 2>/dev/null); then
			ND_ANSWERED=1
			ND_SOURCES=$(printf '%s' "$nd_json" | netdata_chart_sources)
		fi
		netdata_waiting "$@" || return 0
		[ "$(date +%s)" -le "$nd_deadline" ] || return 0
		sleep 1
	done
}

# check_netdata_collectors URL WAIT NAME...: a netdata-collector:NAME line
# for each collector.
check_netdata_collectors() {
	nd_url=$1 nd_wait=$2
	shift 2
	ND_SOURCES='' ND_ANSWERED='' ND_ABSENT=''
	if [ "$LIVE" = 0 ]; then
		for c; do needs_host "netdata-collector:$c"; done
		return
	elif ! command -v curl >/dev/null 2>&1 && ! command -v wget >/dev/null 2>&1; then
		for c; do result WARN "netdata-collector:$c" "neither curl nor wget to ask Netdata at $nd_url"; done
		return
	fi
	for c; do
		if reason=$(collector_absent "$c"); then
			ND_ABSENT="$ND_ABSENT$c|$reason
"
		fi
	done
	netdata_poll "$nd_url" "$nd_wait" "$@"
	for c; do report_collector "$c"; done
}

# report_collector NAME: its line. Missing charts FAIL on bare-metal; on
# slice they WARN, Netdata being ops telemetry there, no slice-readiness
# dependency.
report_collector() {
	n=$(collector_charts "$1")
	if [ "$n" -gt 0 ]; then
		result PASS "netdata-collector:$1" "$n charts at $nd_url"
		return
	elif reason=$(absent_reason "$1"); then
		result WARN "netdata-collector:$1" "no charts: $reason"
		return
	elif [ -z "$ND_ANSWERED" ]; then
		why="Netdata did not answer at $nd_url/api/v1/charts within ${nd_wait}s"
		fix="systemctl status netdata and journalctl -u netdata; check 'bind to' in /etc/netdata/netdata.conf"
	else
		why="no $1 charts at $nd_url after ${nd_wait}s"
		fix="check that $1 is enabled (netdata.conf [plugins] for a plugin, go.d.conf for a go.d module) and read Netdata's collector log (journalctl -u netdata)"
	fi
	if [ "$PROFILE" = slice ]; then
		result WARN "netdata-collector:$1" "$why (Netdata is no slice-readiness dependency)"
	else
		result FAIL "netdata-collector:$1" "$why" "$fix"
	fi
}

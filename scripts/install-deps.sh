#!/usr/bin/env bash
# install-deps.sh installs the Debian packages Berth needs, and only those
# that are missing: a second run changes nothing and does not touch the
# network. BERTH_SKIP_DEPS=1 skips it entirely.
#
# Two groups:
#   required  must install, or the script fails (building, testing, the
#             process and container runtimes and their tests: crun or runc,
#             mkfs.ext4 for workspace disks, unshare for crun on hybrid
#             cgroup hosts; postgresql for the store's Postgres tests and
#             make postgres).
#   optional  for benchmarks' peers (bubblewrap), browser sessions
#             (Chromium; Node.js and npm for the Playwright test and the
#             TypeScript SDK's tests; ffmpeg
#             for MP4 exports of recordings) and document jobs; a package
#             the archive does not offer is reported and skipped.
set -euo pipefail

required=(ca-certificates git make procps util-linux iproute2 python3 gcc libc6-dev
	crun runc e2fsprogs postgresql)
optional=(bubblewrap chromium chromium-headless-shell fonts-noto-core
	libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui python3-uno poppler-utils
	qpdf libimage-exiftool-perl
	nodejs ffmpeg)
# npm runs the Playwright client of the CDP endpoint's test and the TypeScript
# SDK's tests (internal/sdktest: npm ci, tsc, node --test). A Node.js from
# elsewhere (NodeSource) brings its own npm and conflicts with Debian's.
command -v npm >/dev/null 2>&1 || optional+=(npm)

log() { printf 'install-deps: %s\n' "$*" >&2; }

if [[ "${BERTH_SKIP_DEPS:-}" == 1 ]]; then
	log "skipped (BERTH_SKIP_DEPS=1)"
	exit 0
fi

if [[ ! -x /usr/local/go/bin/go ]] && ! command -v go >/dev/null 2>&1; then
	log "warning: Go is not installed; Berth needs the version in go.mod, in /usr/local/go"
fi

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
	log "warning: not a Debian system; install these yourself: ${required[*]} ${optional[*]}"
	exit 0
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing_required=()
missing_optional=()
for p in "${required[@]}"; do installed "$p" || missing_required+=("$p"); done
for p in "${optional[@]}"; do installed "$p" || missing_optional+=("$p"); done

total=$((${#required[@]} + ${#optional[@]}))
if ((${#missing_required[@]} + ${#missing_optional[@]} == 0)); then
	log "all $total packages present"
	exit 0
fi

missing=("${missing_required[@]}" "${missing_optional[@]}")

sudo=()
if [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo=(sudo)
	elif ((${#missing_required[@]} > 0)); then
		log "error: not root and sudo is not installed; install as root: ${missing[*]}"
		exit 1
	else
		log "warning: not root and sudo is not installed; skipping optional packages: ${missing[*]}"
		exit 0
	fi
fi

export DEBIAN_FRONTEND=noninteractive
# Wait for another apt or dpkg run (a second checkout's `make`, say) instead
# of failing on its lock.
apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
apt_install() { "${apt[@]}" install -y --no-install-recommends "$@"; }

log "missing: ${missing[*]}; running apt-get update"
if ! "${apt[@]}" update -qq; then
	if ((${#missing_required[@]} > 0)); then
		log "error: apt-get update failed; cannot install: ${missing_required[*]}"
		exit 1
	fi
	log "warning: apt-get update failed; skipping optional packages: ${missing_optional[*]}"
	exit 0
fi

newly=()
if ((${#missing_required[@]} > 0)); then
	if ! apt_install "${missing_required[@]}"; then
		log "error: could not install required packages: ${missing_required[*]}"
		exit 1
	fi
	newly+=("${missing_required[@]}")
fi

# has_candidate reports whether the archive offers a version of package $1.
has_candidate() {
	local c
	c=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }')
	[[ -n "$c" && "$c" != "(none)" ]]
}

unavailable=()
failed=()
if ((${#missing_optional[@]} > 0)); then
	offered=()
	for p in "${missing_optional[@]}"; do
		if has_candidate "$p"; then
			offered+=("$p")
		else
			unavailable+=("$p")
			log "warning: $p is not available from apt here; skipping it"
		fi
	done
	if ((${#offered[@]} > 0)); then
		if apt_install "${offered[@]}"; then
			newly+=("${offered[@]}")
		else
			# One bad package must not keep the others out.
			for p in "${offered[@]}"; do
				if apt_install "$p"; then
					newly+=("$p")
				else
					failed+=("$p")
					log "warning: installing $p failed; skipping it"
				fi
			done
		fi
	fi
fi

summary="$((total - ${#missing_required[@]} - ${#missing_optional[@]})) present, ${#newly[@]} installed"
((${#unavailable[@]} > 0)) && summary+=", unavailable: ${unavailable[*]}"
((${#failed[@]} > 0)) && summary+=", failed: ${failed[*]}"
log "$summary"

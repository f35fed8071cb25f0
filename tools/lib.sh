# shellcheck shell=bash
# Shared by tools/demo, tools/test and tools/linux-guest: install what is missing, build.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

ensure_packages() {
	local list=()
	while read -r p; do
		if [ -n "$p" ]; then
			list+=("$p")
		fi
	done <"$top/tools/packages.txt"
	ensure_debs "${list[@]}"
}

# ensure_debs PACKAGE...: install those of the named packages that are missing.
ensure_debs() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	local sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo)
	echo "installing: ${missing[*]}" >&2
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
}

# build DIR [meson options...]
build() {
	local dir=$1
	shift
	if [ ! -f "$top/$dir/build.ninja" ]; then
		meson setup "$top/$dir" "$top" "$@" >/dev/null
	fi
	ninja -C "$top/$dir" >/dev/null
}

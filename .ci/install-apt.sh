#!/usr/bin/env bash
# Installs the Debian packages listed in .ci/apt-packages.txt that are not
# installed yet. Needs root (CI and the development VMs run as root).
set -euo pipefail
cd "$(dirname "$0")"
missing=()
while read -r pkg; do
	pkg="${pkg%%#*}"; pkg="${pkg// /}"
	[ -z "$pkg" ] && continue
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done < apt-packages.txt
if [ ${#missing[@]} -eq 0 ]; then
	echo "apt: all $(grep -cv '^\s*\(#\|$\)' apt-packages.txt) packages present" >&2
	exit 0
fi
echo "apt: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2

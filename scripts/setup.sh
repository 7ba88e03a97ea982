#!/usr/bin/env bash
# Installs everything skq's tests and benchmarks need on a fresh Debian machine.
# Idempotent: a second run only checks. Each piece lives in scripts/setup.d/*.sh
# (one per component) so components add what they need without touching this file.
set -euo pipefail
t0=$(date +%s)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# apt-get needs an up-to-date list once per machine; skip when nothing is missing.
export SKQ_APT_UPDATED=${SKQ_APT_UPDATED:-0}
apt_install() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$SKQ_APT_UPDATED" = 0 ]; then
        apt-get update -qq
        SKQ_APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
export -f apt_install

for part in "$here"/setup.d/*.sh; do
    [ -e "$part" ] || continue
    echo "setup: $(basename "$part")"
    # shellcheck source=/dev/null
    source "$part"
done
echo "setup: done in $(( $(date +%s) - t0 )) s"

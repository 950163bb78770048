#!/usr/bin/env bash
# Unpacks the Debian packages that ship data files the project reads (standard-cell libraries whose packages,
# installed through apt, would pull in a whole flow they belong to) into the virtual environment, at the pinned
# versions the library descriptions name (dashraker.asic.libraries), idempotently: usage VENV.
set -euo pipefail
venv="$1"
packages=$("$venv/bin/python" -c '
from dashraker.asic.libraries import LIBRARIES, debian_root
for lib in LIBRARIES.values():
    if lib.registry == "debian":
        print(lib.distribution, lib.version, debian_root(lib.distribution))')
[ -n "$packages" ] || exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
while read -r package version root; do
    [ "$(cat "$root/VERSION" 2>/dev/null)" = "$version" ] && continue
    echo "unpacking Debian package $package=$version into $root"
    if ! (cd "$work" && apt-get download -qq "$package=$version" 2>/dev/null); then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        (cd "$work" && apt-get download -qq "$package=$version")
    fi
    rm -rf "$root.new" && mkdir -p "$root.new"
    dpkg-deb -x "$work/${package}_"*.deb "$root.new"
    echo "$version" > "$root.new/VERSION"
    rm -rf "$root" && mv "$root.new" "$root"
done <<< "$packages"

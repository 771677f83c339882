#!/usr/bin/env bash
# Print the path of a promtool binary, fetching one if needed.
#
# promtool on PATH is used as is. Otherwise the Debian package `prometheus` is downloaded
# (apt-get download: not installed, so no Prometheus service is started) and only its
# promtool is unpacked into .cache/promtool/ of this checkout (about 25 s the first time).
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v promtool >/dev/null 2>&1; then
  command -v promtool
  exit 0
fi
dest="$PWD/.cache/promtool"
if [ ! -x "$dest/usr/bin/promtool" ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  ( cd "$work"
    apt-get download prometheus >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get download prometheus >/dev/null; }
    mkdir -p x && dpkg-deb -x prometheus_*.deb x )
  mkdir -p "$dest/usr/bin"
  cp "$work/x/usr/bin/promtool" "$dest/usr/bin/promtool.tmp" && mv "$dest/usr/bin/promtool.tmp" "$dest/usr/bin/promtool"
fi
echo "$dest/usr/bin/promtool"

#!/usr/bin/env bash
# Usage: scripts/with-node.sh MAJOR [COMMAND ARGS...]
#
# A supported Node.js from the npm registry, for a machine that has another one (CI's have Node 20):
# the package node-<os>-<arch>@MAJOR ships the official binary at package/bin/node, so nothing is
# downloaded but an npm package (npm checks its integrity). It is kept in
# ${XDG_CACHE_HOME:-$HOME/.cache}/kitchen-batch/node-MAJOR and reused from there.
#
# With a command: runs it with that Node first on PATH (npm and npx too then run on it).
# Without one: prints the folder to put first on PATH.
set -euo pipefail

major="${1:?usage: scripts/with-node.sh MAJOR [COMMAND ARGS...]}"
shift
case "$major" in
  '' | *[!0-9]*) echo "with-node: MAJOR must be a number, got \"$major\"" >&2; exit 2 ;;
esac

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) echo "with-node: no npm package of Node.js for $(uname -s)" >&2; exit 2 ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "with-node: no npm package of Node.js for $(uname -m)" >&2; exit 2 ;;
esac

cache="${XDG_CACHE_HOME:-$HOME/.cache}/kitchen-batch"
dir="$cache/node-$major"

# The cached binary, when it is there and of the asked major.
cached_major() {
  [ -x "$dir/bin/node" ] && "$dir/bin/node" -p 'process.versions.node.split(".")[0]' 2>/dev/null
}

if [ "$(cached_major || true)" != "$major" ]; then
  mkdir -p "$cache"
  work="$(mktemp -d "$cache/.node-$major.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  tarball="$(cd "$work" && npm pack "node-$os-$arch@$major" --silent --no-fund --no-audit)"
  tar -xzf "$work/$tarball" -C "$work"
  "$work/package/bin/node" --version >/dev/null
  # Into place in one rename, so a run beside this one never sees half a folder.
  rm -rf "$dir"
  mv "$work/package" "$dir"
  rm -rf "$work"
  trap - EXIT
fi

if [ $# -eq 0 ]; then
  echo "$dir/bin"
else
  PATH="$dir/bin:$PATH" exec "$@"
fi

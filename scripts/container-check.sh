#!/usr/bin/env bash
# Replays the Dockerfile's install and start steps where Docker is absent (CI): the build stage in one
# clean folder, the run stage in another (production dependencies only, no install scripts), then the
# built bin started as the image starts it: --version, and a sandbox run of the sample manifest. All on
# the image's Node.js major (its FROM lines), fetched by scripts/with-node.sh when it is not the one on PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

majors="$(sed -n 's/^FROM node:\([0-9][0-9]*\)-slim.*/\1/p' "$root/Dockerfile" | sort -u)"
if [ "$(printf '%s\n' "$majors" | grep -c .)" != 1 ]; then
  echo "container-check: expected every stage FROM node:<one major>-slim, got: $(grep '^FROM' "$root/Dockerfile" | tr '\n' ' ')" >&2
  exit 1
fi
if [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || true)" != "$majors" ]; then
  exec bash "$root/scripts/with-node.sh" "$majors" bash "$0" "$@"
fi
echo "container-check: Node.js $(node --version), as in FROM node:$majors-slim"

work="$(mktemp -d)"
build_pid=""
trap '[ -z "$build_pid" ] || kill "$build_pid" 2>/dev/null; rm -rf "$work"' EXIT

# The two stages side by side, as BuildKit builds them (the image's stage needs the build's dist/ only
# at its COPY --from=build); each one's output is shown when it fails.
# FROM node:<major>-slim AS build
mkdir -p "$work/build"
cp "$root"/package.json "$root"/package-lock.json "$root"/tsconfig.json "$root"/tsconfig.build.json "$work/build/"
cp -r "$root/src" "$work/build/src"
(cd "$work/build" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error && npm run build --silent) \
  > "$work/build.log" 2>&1 &
build_pid=$!

# FROM node:<major>-slim (the image)
mkdir -p "$work/app"
cp "$root"/package.json "$root"/package-lock.json "$work/app/"
app_status=0
(cd "$work/app" && NODE_ENV=production npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error) \
  > "$work/app.log" 2>&1 || app_status=$?
build_status=0
wait "$build_pid" || build_status=$?
build_pid=""
if [ "$build_status" != 0 ]; then
  cat "$work/build.log" >&2
  echo "container-check: the build stage failed (exit $build_status)" >&2
  exit 1
fi
if [ "$app_status" != 0 ]; then
  cat "$work/app.log" >&2
  echo "container-check: the image stage's npm ci failed (exit $app_status)" >&2
  exit 1
fi
cp -r "$work/build/dist" "$work/app/dist"
cp -r "$root/manifests" "$work/app/manifests"
if [ -e "$work/app/node_modules/typescript" ] || [ -e "$work/app/node_modules/vitest" ]; then
  echo "container-check: dev dependencies in the image" >&2
  exit 1
fi

# ENV of the image (the last stage's ENV lines: NAME=value pairs without spaces in values)
for pair in $(sed -n 's/^ENV //p' "$root/Dockerfile" | tail -n 1); do export "${pair?}"; done

# ENTRYPOINT ["node", "/app/dist/bin.js"]
cd "$work/app"
node dist/bin.js --version
node dist/bin.js run manifests/sample.csv --sandbox --out "$work/out" --no-progress --json > "$work/summary.json"
node -e 'const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); if (s.exit_code !== 0 || s.totals.succeeded !== s.totals.items) { console.error(s); process.exit(1); } console.log(`container-check: ${s.totals.succeeded}/${s.totals.items} succeeded from the image layout`);' "$work/summary.json"

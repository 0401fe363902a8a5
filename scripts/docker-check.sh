#!/usr/bin/env bash
# Builds the container image when a container builder is present and its
# daemon answers (docker, else podman); otherwise says why it skipped.
# The image's ralph must answer --version with the stamped VERSION.
set -euo pipefail
version=${1:?usage: docker-check.sh VERSION}
builder=
for b in docker podman; do
  if command -v "$b" >/dev/null 2>&1; then builder=$b; break; fi
done
if [ -z "$builder" ]; then
  echo "docker-check: skipped: neither docker nor podman is installed"; exit 0
fi
if ! why=$("$builder" info 2>&1 >/dev/null); then
  echo "docker-check: skipped: \`$builder info\` fails: $(tail -n1 <<<"$why")"; exit 0
fi
cd "$(dirname "$0")/.."
"$builder" build --build-arg VERSION="$version" -t ralph:check .
out=$("$builder" run --rm ralph:check --version)
case $out in "ralph version $version "*) echo "docker-check: image ralph:check ok: $out" ;;
  *) echo "docker-check: the image's ralph --version printed \"$out\", want $version" >&2; exit 1 ;; esac
"$builder" run --rm --entrypoint sh ralph:check -c 'git --version && bwrap --version'

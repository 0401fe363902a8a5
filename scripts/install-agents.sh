#!/usr/bin/env bash
# install-agents.sh — install the agent CLIs ralph drives, at pinned versions,
# from the npm registry into one private prefix:
#
#     ${RALPH_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ralph/agents}/node_modules/.bin/{claude,codex,opencode,gemini,amp,copilot}
#
# ralph's adapters look in that .bin folder before $PATH, so nothing has to
# be added to PATH. The script is idempotent: packages already present at the
# pinned version are skipped. Each CLI must answer --version after install.
#
# Usage: scripts/install-agents.sh [NAME…]   (NAME = claude codex opencode gemini amp copilot;
#                                             default: all)
# Exit status: 0 when every requested CLI is installed and runs; otherwise 1,
# with a line naming the npm package that failed.
set -euo pipefail

# Pinned versions (npm view PKG version, checked when this file was written).
# name|npm package|version|binary
PINS=(
	"claude|@anthropic-ai/claude-code|2.1.330|claude"
	"codex|@openai/codex|0.169.0|codex"
	"opencode|opencode-ai|1.18.33|opencode"
	"gemini|@google/gemini-cli|0.61.0|gemini"
	"amp|@sourcegraph/amp|0.0.1790142911-g7618fb|amp"
	"copilot|@github/copilot|1.0.102|copilot"
)

DIR="${RALPH_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ralph/agents}"
BIN="$DIR/node_modules/.bin"

if ! command -v npm >/dev/null 2>&1; then
	echo "install-agents: npm not found; install Node.js (>= 20) first" >&2
	exit 1
fi

want=("$@")
selected() {
	[ ${#want[@]} -eq 0 ] && return 0
	local w
	for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}
if [ ${#want[@]} -gt 0 ]; then
	for w in "${want[@]}"; do
		ok=0
		for pin in "${PINS[@]}"; do [ "${pin%%|*}" = "$w" ] && ok=1; done
		if [ $ok -eq 0 ]; then
			echo "install-agents: unknown agent '$w' (known: claude codex opencode gemini amp copilot)" >&2
			exit 2
		fi
	done
fi

mkdir -p "$DIR"
# A private package.json keeps npm from walking up into some other project.
[ -f "$DIR/package.json" ] || printf '{\n  "name": "ralph-agents",\n  "private": true\n}\n' >"$DIR/package.json"

installed_version() { # $1 = package name
	local pj="$DIR/node_modules/$1/package.json"
	[ -f "$pj" ] || return 0
	node -e 'try{process.stdout.write(require(process.argv[1]).version||"")}catch(e){}' "$pj"
}

specs=()
for pin in "${PINS[@]}"; do
	IFS='|' read -r name pkg ver bin <<<"$pin"
	selected "$name" || continue
	have="$(installed_version "$pkg")"
	if [ "$have" = "$ver" ] && [ -x "$BIN/$bin" ]; then
		echo "install-agents: $pkg@$ver already installed"
	else
		[ -n "$have" ] && echo "install-agents: $pkg is at $have, want $ver"
		specs+=("$pkg@$ver")
	fi
done

npm_install() {
	npm install --prefix "$DIR" --no-audit --no-fund --save-exact --no-package-lock \
		--loglevel=error --include=optional "$@"
}

# Record every pinned package present (or about to be) in the private
# package.json, so npm never prunes one CLI while installing another.
record() { # pkg ver…
	node -e '
		const fs = require("fs"), f = process.argv[1];
		const pj = JSON.parse(fs.readFileSync(f, "utf8"));
		pj.dependencies = pj.dependencies || {};
		for (let i = 2; i < process.argv.length; i += 2) pj.dependencies[process.argv[i]] = process.argv[i + 1];
		fs.writeFileSync(f, JSON.stringify(pj, null, 2) + "\n");
	' "$DIR/package.json" "$@"
}
for pin in "${PINS[@]}"; do
	IFS='|' read -r name pkg ver bin <<<"$pin"
	if [ "$(installed_version "$pkg")" = "$ver" ]; then record "$pkg" "$ver"; fi
done

if [ ${#specs[@]} -gt 0 ]; then
	echo "install-agents: npm install --prefix $DIR ${specs[*]}"
	if ! npm_install "${specs[@]}"; then
		# Find out which one broke by installing them one at a time.
		for spec in "${specs[@]}"; do
			if ! npm_install "$spec"; then
				echo "install-agents: FAILED to install $spec from the npm registry" >&2
				exit 1
			fi
		done
	fi
fi

# Every requested CLI must run.
status=0
for pin in "${PINS[@]}"; do
	IFS='|' read -r name pkg ver bin <<<"$pin"
	selected "$name" || continue
	if [ ! -x "$BIN/$bin" ]; then
		echo "install-agents: FAILED: $pkg@$ver installed no $BIN/$bin" >&2
		status=1
		continue
	fi
	if out="$(cd "$DIR" && timeout 60 "$BIN/$bin" --version </dev/null 2>&1)"; then
		echo "install-agents: ok $name ($pkg@$ver): $(printf '%s' "$out" | head -n 1)"
	else
		echo "install-agents: FAILED: $BIN/$bin --version ($pkg@$ver) exited non-zero:" >&2
		printf '%s\n' "$out" | tail -n 5 >&2
		status=1
	fi
done
exit $status

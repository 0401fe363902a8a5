#!/usr/bin/env bash
# Installs the system tools some tests need when they are missing: tmux
# (tests that need a real terminal), chromium (the web dashboard's browser
# test, headless), bubblewrap (the sandbox every agent and gate runs in by
# default: without it those tests fail, they never skip) and curl (the
# sandbox tests' network tries) and gh (the GitHub CLI: ralph run --issues
# and --pr, tested against a scripted GitHub), Debian's pytest (the
# toolchain end-to-end tests run a Python project's tests with it) and
# openssh-client (ssh-agent, for the sandbox's test of the user's keys).
# Debian/Ubuntu packages via apt-get; elsewhere it says what to install.
set -euo pipefail
missing=()
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v gh >/dev/null 2>&1 || missing+=(gh)
/usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || missing+=(python3-pytest)
command -v ssh-agent >/dev/null 2>&1 || missing+=(openssh-client)
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-tools: please install ${missing[*]} (the tests that need them skip meanwhile; without bubblewrap the sandbox tests fail)" >&2
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else
    echo "install-tools: not root and no sudo: install ${missing[*]} yourself (the tests that need them skip meanwhile; without bubblewrap the sandbox tests fail)" >&2
    exit 0
  fi
fi
echo "install-tools: installing ${missing[*]}" >&2
if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >&2; then
  echo "install-tools: could not install ${missing[*]} (the tests that need them skip meanwhile; without bubblewrap the sandbox tests fail)" >&2
fi

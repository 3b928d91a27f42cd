#!/usr/bin/env bash
# Headless Chromium for the `sage view` browser tests (tests/it/view.rs), and nothing else:
# without it those tests print one SKIPPED line (and fail in CI, which runs this first).
# Uses the system package manager, so it needs root (or sudo); run it only if you want those
# tests to run.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
    || command -v google-chrome >/dev/null 2>&1; then
    echo "install-chromium: a Chromium is installed already"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: no apt-get here; install Chromium with your package manager" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-chromium: needs root (or sudo) for apt-get" >&2
        exit 1
    fi
    SUDO=sudo
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium

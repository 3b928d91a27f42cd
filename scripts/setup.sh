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

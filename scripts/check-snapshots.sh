#!/usr/bin/env bash
# Fail when a snapshot file is no longer referenced by any test (a renamed or deleted test
# leaves its golden output behind, where it would be reviewed but never checked).
# Usage: scripts/check-snapshots.sh REFERENCES_FILE
# REFERENCES_FILE is what insta wrote while the tests ran with
# INSTA_SNAPSHOT_REFERENCES_FILE set to it (see .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
refs="${1:?usage: check-snapshots.sh REFERENCES_FILE}"
[ -s "$refs" ] || { echo "check-snapshots: $refs is empty: no snapshot test ran" >&2; exit 1; }
seen="$(mktemp)"
while IFS= read -r r; do realpath -m "$r"; done < "$refs" | sort -u > "$seen"
unreferenced=0
while IFS= read -r snap; do
    if ! grep -qxF "$(realpath "$snap")" "$seen"; then
        echo "unreferenced snapshot: $snap" >&2
        unreferenced=$((unreferenced + 1))
    fi
done < <(find . -path ./target -prune -o -name '*.snap' -path '*/snapshots/*' -print | sort)
if [ "$unreferenced" -gt 0 ]; then
    echo "check-snapshots: $unreferenced unreferenced snapshot(s); delete them or the test that lost them" >&2
    exit 1
fi
echo "check-snapshots: every snapshot is referenced by a test"

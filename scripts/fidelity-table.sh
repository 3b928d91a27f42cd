#!/usr/bin/env bash
# The replay-fidelity table of docs/adapters-fidelity.md: `sage replay --format json` on every
# real sample listed in tests/data/replay-samples.tsv, summed per format.
#
#   scripts/fidelity-table.sh [--update]     print the table (--update: rewrite it in the doc)
#
# SAGE (default: target/debug/sage) is the binary, TRACES (default: ../shared/traces) the folder,
# MODE (default: --execute) how commands are treated (--no-execute: the table before replay
# by execution; --execute fails where no sandbox can be made).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
sage="${SAGE:-$here/target/debug/sage}"
traces="${TRACES:-$here/../shared/traces}"
list="$here/tests/data/replay-samples.tsv"
doc="$here/docs/adapters-fidelity.md"
command -v jq >/dev/null || { echo "fidelity-table: jq is needed" >&2; exit 2; }
[ -x "$sage" ] || { echo "fidelity-table: no sage binary at $sage (cargo build, or set SAGE)" >&2; exit 2; }
[ -d "$traces" ] || { echo "fidelity-table: no traces folder at $traces (set TRACES)" >&2; exit 2; }

rows=""
while IFS=$'\t' read -r trace results flags; do
  case "$trace" in ''|'#'*) continue ;; esac
  args=()
  for r in $results; do [ "$r" = - ] || args+=(--result "$r"); done
  for f in $flags; do args+=("$f"); done
  args+=("${MODE:---execute}")
  # exit 1 means some file differs: the report is still complete
  json="$(cd "$traces" && "$sage" replay "$trace" "${args[@]}" --format json 2>/dev/null || true)"
  if [ -z "$json" ]; then
    echo "fidelity-table: sage replay could not read $trace" >&2
    exit 1
  fi
  rows+="$(jq -c '{framework, c: .counts}' <<<"$json")"$'\n'
done <"$list"

table="$(jq -rs '
  group_by(.framework)
  | (["| format | traces | files | matched | differs | unverifiable |", "|---|---|---|---|---|---|"]
     + map("| \(.[0].framework) | \(length) | \(map(.c.files)|add) | \(map(.c.matches)|add) | \(map(.c.differs)|add) | \(map(.c.unverifiable)|add) |")
     + ["| **all** | \(map(length)|add) | \(flatten|map(.c.files)|add) | \(flatten|map(.c.matches)|add) | \(flatten|map(.c.differs)|add) | \(flatten|map(.c.unverifiable)|add) |"])
  | .[]' <<<"$rows")"

if [ "${1:-}" = "--update" ]; then
  begin='<!-- fidelity-table: begin (scripts/fidelity-table.sh --update) -->'
  end='<!-- fidelity-table: end -->'
  TABLE="$table" BEGIN="$begin" END="$end" perl -0pi -e \
    's/\Q$ENV{BEGIN}\E.*?\Q$ENV{END}\E/$ENV{BEGIN}\n$ENV{TABLE}\n$ENV{END}/s' "$doc"
  grep -qF "$begin" "$doc" || { echo "fidelity-table: markers missing in $doc" >&2; exit 1; }
else
  printf '%s\n' "$table"
fi

#!/usr/bin/env bash
# tests/bench/key_lookup.sh [N] - incremental ingest's lookup of N source
# keys (default 1,000,000) in a dataset of N rows, against the listing's
# own time in the same run (tests/bench/key_lookup.c says what each
# figure covers).  Builds the program when missing.
#   tests/bench/key_lookup.sh 1000000
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/build/tests/key_lookup}
[ -x "$BIN" ] || make -C "$root" --no-print-directory build/tests/key_lookup >&2
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-keys.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$BIN" "${1:-1000000}" "$T"

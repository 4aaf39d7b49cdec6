#!/usr/bin/env bash
# The binary's front door: help, version, unknown commands and flags.
. "$DLK_TESTS/lib.sh"
ok "--version" dlk --version
check "version printed" grep -qE '^dlk [0-9]+\.[0-9]+\.[0-9]+' "$OUT"
ok "--help" dlk --help
check "help lists commands" grep -q "verify" "$OUT"
fails "no command" 2 dlk
fails "unknown command" 2 dlk frobnicate
check "unknown command named" grep -q "'frobnicate' is not a dlk command" "$ERR"
for c in create ingest ls cat verify; do
    ok "dlk help $c" dlk help "$c"
    check "help $c shows usage" grep -q "usage: dlk $c" "$OUT"
    ok "dlk $c --help" dlk "$c" --help
    fails "dlk $c --bogus" 2 dlk "$c" --bogus
    check "usage on stderr for $c" grep -q "usage: dlk $c" "$ERR"
done
fails "help of unknown command" 2 dlk help nope
if [ -w /dev/full ]; then
    fails "stdout to /dev/full is an error" 3 sh -c "\"$DLK\" --help > /dev/full"
fi

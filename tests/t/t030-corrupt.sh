#!/usr/bin/env bash
# Every input kept under tests/corrupt/ (hand-made hostile objects and
# everything a fuzzer ever found) is refused through the command line with
# a clean error: an exit status, a message, never a crash.  The parsers
# themselves replay the same files in the unit tests (test_chunk,
# test_manifest, test_npy), and, where the libFuzzer targets are built
# (t020), through them too.
# after: t020-fuzz.sh
#
#   corrupt/chunk, corrupt/fuzz_chunk        chunk objects: dlk cat, verify
#   corrupt/manifest, corrupt/fuzz_manifest  staging/manifest.json: dlk ls
#   corrupt/dataset_json                     dlk.json: dlk ls
#   corrupt/npy, corrupt/fuzz_npy            .npy sources: dlk ingest
. "$DLK_TESTS/lib.sh"
root=$(cd "$DLK_TESTS/.." && pwd)
# Under `make SAN=1 test` a sanitizer report must not pass for an expected
# error exit: make it abort (a signal, which lib.sh fails), and look for
# reports on stderr as well.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}abort_on_error=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}abort_on_error=1:print_stacktrace=1
no_report() { ! grep -qE 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$ERR"; }
C=$DLK_TESTS/corrupt
KEY=0123456789abcdef0123456789abcdef

# Any exit but a signal; an error exit says why (stderr, or stdout for
# verify's report).
no_crash() { # NAME CMD...
    local name=$1; shift
    "$@" >"$OUT" 2>"$ERR"
    local rc=$?
    if [ "$rc" -ge 128 ]; then
        echo "not ok - $name (killed by signal $((rc - 128)))"
    elif ! no_report; then
        echo "not ok - $name (sanitizer report)"
    elif [ "$rc" -ne 0 ] && [ ! -s "$ERR" ] && [ ! -s "$OUT" ]; then
        echo "not ok - $name (exit $rc without a message)"
    else
        echo "ok - $name"
        return 0
    fi
    sed 's/^/#   stderr: /' "$ERR" | head -n 15
    return 1
}

files() { # DIR...: the regular files, sorted
    local d
    for d in "$@"; do
        [ -d "$d" ] && find "$d" -maxdepth 1 -type f ! -name '.*' | sort
    done
}

# ---- chunks ---------------------------------------------------------------
# A dataset whose one tensor has one chunk: the file under test, with a
# manifest entry that agrees with its size, so that the reader gets past
# the size check to the chunk parser.
n=0
for f in $(files "$C/chunk" "$C/fuzz_chunk"); do
    name=${f#"$C"/}
    case $(basename "$f") in
        var-*) spec=t:i16:?x3 samples=3 raw=42 ;;
        zstd-*) spec=t:u32:12:zstd samples=4 raw=192 ;;
        *) spec=t:u8:4x4x3 samples=3 raw=144 ;;
    esac
    n=$((n + 1))
    DS=$(ds_url "chunk$n")
    size=$(wc -c <"$f" | tr -d ' ')
    [ "$size" -lt 64 ] && stored=64 || stored=$size
    "$DLK" create "$DS" --tensor "$spec" >/dev/null || { echo "not ok - $name: create"; continue; }
    obj_get "$DS" staging/manifest.json "$T/m.json"
    python3 - "$T/m.json" "$KEY" "$samples" "$stored" "$raw" <<'PY'
import json, sys
p, key, samples, stored, raw = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
m = json.load(open(p))
t = m["tensors"][0]
t["samples"] = samples
t["chunks"] = [[key, samples, stored, raw]]
json.dump(m, open(p, "w"))
PY
    obj_put "$DS" staging/manifest.json "$T/m.json"
    [ "${DLK_TEST_STORE:-file}" = s3 ] || mkdir -p "$DS/chunks/t"
    obj_put "$DS" "chunks/t/$KEY" "$f"
    no_crash "$name: dlk cat" dlk cat "$DS" t 0
    no_crash "$name: dlk cat --raw of the last sample" dlk cat "$DS" t $((samples - 1)) --raw
    fails "$name: dlk verify --deep finds it" 1 dlk verify "$DS" --deep
    check "$name: no sanitizer report" no_report
    check "$name: verify names the chunk" grep -q "chunks/t/$KEY" "$OUT"
done
[ "$n" -gt 0 ] || skip "corrupt chunks through the CLI" "no files under $C/chunk"

# ---- manifests and dlk.json ----------------------------------------------
DS=$(ds_url meta)
ok "make a dataset" dlk create "$DS" --tensor t:u8:4x4x3
obj_get "$DS" staging/manifest.json "$T/good-manifest.json"
obj_get "$DS" dlk.json "$T/good-dlk.json"
for f in $(files "$C/manifest" "$C/fuzz_manifest"); do
    name=${f#"$C"/}
    obj_put "$DS" staging/manifest.json "$f"
    fails "$name: dlk ls refuses it" 3 dlk ls "$DS"
    check "$name: no sanitizer report" no_report
    check "$name: the message names the manifest" grep -q "manifest" "$ERR"
    no_crash "$name: dlk verify" dlk verify "$DS"
done
obj_put "$DS" staging/manifest.json "$T/good-manifest.json"
ok "the dataset reads again with its own manifest" dlk ls "$DS"

head -c 70000 /dev/zero | tr '\0' ' ' >"$T/big-dlk.json"
printf '{"format": "dlk", "version": 1, "id": "abc"}' >>"$T/big-dlk.json"
for f in $(files "$C/dataset_json") "$T/big-dlk.json"; do
    name=${f#"$C"/}
    [ "$f" = "$T/big-dlk.json" ] && name="dlk.json of 70 KB"
    obj_put "$DS" dlk.json "$f"
    fails "$name: dlk ls refuses it" 3 dlk ls "$DS"
    check "$name: no sanitizer report" no_report
    check "$name: the message names dlk.json" grep -q "dlk.json" "$ERR"
done
obj_put "$DS" dlk.json "$T/good-dlk.json"
ok "the dataset reads again with its own dlk.json" dlk ls "$DS"

# ---- .npy sources ---------------------------------------------------------
DS=$(ds_url npy)
ok "make a dataset for .npy sources" dlk create "$DS" --tensor t:i32:2
for f in $(files "$C/npy" "$C/fuzz_npy"); do
    name=${f#"$C"/}
    rm -rf "$T/src" && mkdir -p "$T/src" && cp "$f" "$T/src/0001.t.npy"
    fails "$name: dlk ingest refuses it" 3 dlk ingest "$DS" from-dir "$T/src" --on-error fail
    check "$name: no sanitizer report" no_report
    check "$name: the message names the file" grep -q "0001.t.npy" "$ERR"
done
ok "nothing was ingested from them" dlk ls "$DS" --json
check "no samples" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert all(t["samples"]==0 for t in d["tensors"]), d' "$OUT"

# ---- the same files through the fuzz targets, when built -------------------
for t in chunk manifest npy; do
    bin=$root/build-fuzz/fuzz_$t
    set -- $(files "$C/$t" "$C/fuzz_$t")
    if [ ! -x "$bin" ]; then
        skip "replay through fuzz_$t" "not built (make fuzz; needs clang)"
    elif [ $# -eq 0 ]; then
        skip "replay through fuzz_$t" "no inputs"
    else
        ok "replay $# inputs through fuzz_$t" "$bin" -runs=1 "$@"
    fi
done

#!/usr/bin/env bash
# The libFuzzer targets (tests/fuzz/): build them and run each for a
# bounded time (FUZZ_SECONDS, default 30) from its seed corpus.  A crash,
# leak, sanitizer report or failed property check fails the test; the
# input that caused it is kept under build-fuzz/artifacts/ to minimize and
# add to tests/corrupt/<target>/.  Skipped without clang and libFuzzer.
. "$DLK_TESTS/lib.sh"
root=$(cd "$DLK_TESTS/.." && pwd)
secs=${FUZZ_SECONDS:-30}

have_libfuzzer() {
    command -v clang >/dev/null 2>&1 || return 1
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' >"$T/probe.c"
    clang -fsanitize=fuzzer,address,undefined "$T/probe.c" -o "$T/probe" >/dev/null 2>&1
}
if ! have_libfuzzer; then
    skip "fuzz targets" "needs clang with libFuzzer: apt-get install clang libclang-rt-14-dev"
    exit 0
fi

ok "build the fuzz targets" env -u MAKEFLAGS -u MAKELEVEL -u SAN make -C "$root" -f tests/fuzz/Makefile
[ -x "$root/build-fuzz/fuzz_chunk" ] || exit 1

run_target() { # TARGET MAX_LEN [ARGS...]
    local t=$1 len=$2; shift 2
    local corpus=$T/corpus-$t art=$root/build-fuzz/artifacts/$t/
    mkdir -p "$corpus" "$art"
    ok "$t: ${secs}s of fuzzing without a finding" \
        "$root/build-fuzz/$t" -max_total_time="$secs" -rss_limit_mb=2048 \
        -max_len="$len" -timeout=20 -print_final_stats=1 \
        -artifact_prefix="$art" "$@" "$corpus" "$root/tests/fuzz/corpus/$t"
    local execs
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$ERR")
    echo "# $t: ${execs:-?} executions in ${secs}s"
    check "$t ran" test -n "$execs"
}
run_target fuzz_chunk 1048576
run_target fuzz_manifest 65536 -dict="$root/tests/fuzz/fuzz_manifest.dict"
run_target fuzz_npy 8192 -dict="$root/tests/fuzz/fuzz_npy.dict"
run_target fuzz_docs 65536 -dict="$root/tests/fuzz/fuzz_manifest.dict"
run_target fuzz_s3xml 65536
run_target fuzz_query 4096 -dict="$root/tests/fuzz/fuzz_query.dict"
# the media front doors: seeds are fixtures made at test time
if [ -x "$root/build-fuzz/fuzz_image" ] &&
    env -u MAKEFLAGS -u MAKELEVEL -u SAN make -s -C "$root" -f tests/fuzz/Makefile media-seeds >/dev/null 2>&1; then
    mkdir -p "$root/tests/fuzz/corpus/fuzz_image" "$root/tests/fuzz/corpus/fuzz_video"
    run_target fuzz_image 1048576 "$root/build-fuzz/corpus/fuzz_image"
    run_target fuzz_video 1048576 "$root/build-fuzz/corpus/fuzz_video"
else
    skip "media fuzz targets" "media-seeds needs ffmpeg and ImageMagick: apt-get install ffmpeg imagemagick"
fi

#!/usr/bin/env bash
# SIGINT and SIGTERM during an ingest from S3 (moto behind faultproxy.py
# --delay-ms, one GET at a time, so that a run takes 4 s and is stopped
# twice mid-way): the
# rows appended are checkpointed at once (well inside --checkpoint's 30
# s), the run says how many it kept and exits 130 / 143 without touching
# the head, and the same command continues and ends with every object
# exactly once.  And the progress line: on a terminal (a pseudo-TTY made
# by script(1)), from the listing on; never without one, nor with --json.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest interrupt" "ffmpeg missing"; exit 0; }

S=$T/src
mkdir -p "$S/cat" "$S/dog"
ff -f lavfi -i "testsrc2=s=96x64:r=25" -frames:v 20 -q:v 4 "$S/cat/c%04d.jpg"
ff -f lavfi -i "testsrc2=s=96x64:r=25" -frames:v 20 -q:v 4 "$S/dog/d%04d.jpg"
args=(--resize 32x24 --jobs 1 --fetch 1)
REF=$T/ref
ok "reference: an uninterrupted ingest of the tree" dlk create "$REF" from-dir "$S" "${args[@]}" --quiet
dump "$REF" key key_version > "$T/ref.txt"  # paths and size+mtime here, URLs and ETags from S3

s3_start
s3_mkbucket raw
s3_put_tree "$S" s3://raw/train
s3_proxy_start --delay-ms 100
export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PROXY_PORT

samples() { "$DLK" ls "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tensors"][0]["samples"])'; }
# stop SIG AFTER OUT ERR: the create run stopped by SIG after AFTER seconds
stop() {
    "$DLK" create "$DS" from-s3 s3://raw/train "${args[@]}" "${@:4}" >"$T/$3.out" 2>"$T/$3.err" &
    local pid=$!
    sleep "$2"
    kill "-$1" "$pid"
    wait "$pid"
}
kept() { sed -n 's/^.*interrupted: \([0-9]*\) rows kept; run the same command to continue$/\1/p' "$1"; }

DS=$T/ds
stop INT 1.2 int
rc=$?
check "SIGINT: exit 130" test "$rc" = 130
n1=$(kept "$T/int.err")
echo "# kept after SIGINT: ${n1:-none}"
check "SIGINT: 'interrupted: N rows kept; run the same command to continue'" test -n "$n1"
check "SIGINT: some rows kept, not all (default --checkpoint 30)" test "${n1:-0}" -gt 0 -a "${n1:-40}" -lt 40
check "SIGINT: nothing merged into the head" test "$(samples "$DS")" = 0

stop TERM 1.2 term --json
rc=$?
check "SIGTERM: exit 143" test "$rc" = 143
check "SIGTERM --json: one object, error with exit code 143, kept, resumed" python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); n1=int(sys.argv[2])
assert d["error"]["exit_code"]==143 and d["interrupted"] is True, d
assert "interrupted: %d rows kept" % d["kept"] in d["error"]["message"], d
assert d["resumed"]==n1 and d["kept"]>n1, d' "$T/term.out" "${n1:-0}"
check "SIGTERM: the message on stderr" grep -q "interrupted: [0-9]* rows kept; run the same command to continue" "$T/term.err"
check "SIGTERM: nothing merged into the head" test "$(samples "$DS")" = 0

ok "the same command continues" dlk create "$DS" from-s3 s3://raw/train "${args[@]}" --json
check "it resumed the kept rows and finished" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["complete"] and d["resumed"]>0 and d["ingested"]+d["resumed"]==40, d' "$OUT"
dump "$DS" key key_version > "$T/ds.txt"
check "every object exactly once, in order: equal to the uninterrupted run" cmp "$T/ref.txt" "$T/ds.txt"
ok "verify" dlk verify "$DS" --deep

# progress on a terminal
if command -v script >/dev/null; then
    P=$T/pty
    script -qec "'$DLK' create '$T/p1' from-s3 s3://raw/train ${args[*]}" /dev/null > "$P.1" 2>&1
    check "pty: exit 0" test $? = 0
    check "pty: the listing shows the keys found" grep -aq "listing: [0-9]* keys found" "$P.1"
    check "pty: then rows, rows/s, MB/s in and out, ETA" grep -aqE "[0-9]+/40 rows  [0-9]+ rows/s  in [0-9.]+ MB/s  out [0-9.]+ MB/s  ETA" "$P.1"
    check "pty: redrawn in place several times" test "$(tr '\r' '\n' < "$P.1" | grep -ac 'rows/s')" -ge 3
    check "pty: the last line says 40/40" grep -aq "40/40 rows" "$P.1"
    script -qec "'$DLK' create '$T/p2' from-dir '$S' ${args[*]}" /dev/null > "$P.2" 2>&1
    check "pty, from-dir: progress too" grep -aq "40/40 rows .* rows/s" "$P.2"
    script -qec "'$DLK' create '$T/p3' from-dir '$S' ${args[*]} --json" /dev/null > "$P.3" 2>&1
    check "pty, --json: no progress" sh -c '! grep -aq "rows/s" "$1"' sh "$P.3"
    script -qec "'$DLK' create '$T/p4' from-dir '$S' ${args[*]} --quiet" /dev/null > "$P.4" 2>&1
    check "pty, --quiet: no progress" sh -c '! grep -aq "rows/s" "$1"' sh "$P.4"
else
    skip "progress on a pty" "script missing: apt-get install util-linux"
fi
ok "no terminal: no progress" dlk create "$T/p5" from-dir "$S" "${args[@]}"
check "stderr has no progress line" sh -c '! grep -aq "rows/s\|listing:" "$1"' sh "$ERR"

#!/usr/bin/env bash
# Every numeric option of every command is read by one parser
# (cmd/options.c) that checks its range: a value out of range, negative,
# not a number, or past 2^32 or 2^64 is a usage error (exit 2) whose
# message names the option ("--batch-size: 4294967297 is out of range
# (1 to 16777216)"), never a wrapped or truncated number that runs.
# The ends of each range are accepted (the run then goes on: to fail on
# a dataset that is not there, or to create one; anything but exit 2).
. "$DLK_TESTS/lib.sh"

NO=$T/none          # no dataset here: an accepted value gets exit 3
mkdir -p "$T/new"
n=0

# COMMAND|ARGS BEFORE|OPTION|VALUES ACCEPTED|VALUES REFUSED|GENERIC
# GENERIC: int (also refused: abc, -1, "", 2^64 + 1), float (abc, -1,
# nan, inf), or none (the values given only).  @ in ARGS is a new path.
table=$(cat <<EOF
bench-stream|$NO --device cpu|--batch-size|1 16777216|0 16777217 4294967297 4294967296|int
bench-stream|$NO --device cpu|--workers|1 256|0 257 4294967297|int
bench-stream|$NO --device cpu|--prefetch|1 65536|0 65537 4294967297|int
bench-stream|$NO --device cpu|--window|1 65536|0 65537 4294967297|int
bench-stream|$NO --device cpu|--span-parts|1 65536|0 65537 4294967297|int
bench-stream|$NO --device cpu|--seed|0 4294967297 18446744073709551615|18446744073709551616|int
bench-stream|$NO --device cpu|--epochs|1 1000000|0 1000001 4294967297|int
bench-stream|$NO --device cpu|--step-ms|0 60000|60000.5 1e999|float
bench-stream|$NO --device cpu --world 4294967295|--rank|0 4294967294|4294967295 4294967297|int
bench-stream|$NO --device cpu|--world|1 4294967295|0 4294967296 4294967297|int
bench-stream|$NO --device cpu|--memory|1 1T 16M|0 2T 4294967297T 16MiBx|int
bench-stream|$NO --device cpu|--pin-cache|0 1T auto|-1 2T 18446744073709551617 abc 16MiBx|none
bench-stream|$NO --device cpu|--baseline-seconds|0.001 86400|0 86401|float
bench-stream|$NO --device cpu|--s3-price|0,0 1000000,1000000|-1,0 0,-1 1000001,0 0,abc abc 1 nan,1|none
query|$NO --near emb=0|--k|1 1000000|0 1000001 4294967297|int
query|$NO|--limit|0 4294967295|4294967296 4294967297|int
query|$NO|--threads|1 256|0 257 4294967297|int
query|$NO --near|emb=|0 9223372036854775807|9223372036854775808 18446744073709551616 18446744073709551617|none
log|$NO|--max|1 18446744073709551615|0 18446744073709551616|int
log|$NO|-n|1 4294967297|0 18446744073709551617|int
gc|$NO|--grace|0 1000000000 1000000000s 16666666m 277777h 11574d|1000000001 16666667m 277778h 11575d 5y 4294967297d 18446744073709551617s|int
compact|$NO|--target-size|1 1G|0 1025M 4294967297|int
cat|$NO labels 0|--frame|0 2147483647|2147483648 4294967297|int
cat|$NO labels|INDEX|0 18446744073709551615|18446744073709551616 abc|none
create|@ --tensor x:u8|--chunk-size|1 1G|0 1025M 4294967297|int
create|@ --tensor x:u8|--part-size|4K 1G|4095 1025M 4294967297|int
EOF
)
# the options ingest and create share, for each of the two
for c in "ingest|$NO from-dir $T/nosrc" "create|@ from-dir $T/nosrc"; do
    table+=$(cat <<EOF

${c}|--channels|1 3 4|0 2 5 4294967297|int
${c}|--max-pixels|1 1099511627776|0 1099511627777 18446744073709551616|int
${c}|--frames|1 4096|0 4097 4294967297|int
${c}|--fps|0.001 1e300|0|float
${c}|--clip-seconds|0.001 1e300|0|float
${c}|--order-seed|0 9223372036854775807|9223372036854775808 18446744073709551616|int
${c}|--jobs|1 1024|0 1025 4294967297|int
${c}|-j|1 1024|0 1025 4294967297|int
${c}|--fetch|1 1024|0 1025 4294967297|int
${c}|--checkpoint|0.001 1e300|0|float
${c}|--max-skip|0 1 0.5|1.01 0.5x|float
${c}|--shard|0/1 99999/100000|1/1 0/0 0/100001 4294967297/4294967298 0/4294967297 0/18446744073709551617 -1/2 abc 1|none
${c}|--resize|1x1 65535x65535|0x5 5x0 65536x5 4294967297x5 5x18446744073709551617 -1x5 ax5 5|none
EOF
)
done

# accepted NAME CMD...: CMD does not exit 2 (nor by a signal)
accepted() {
    local name=$1 rc
    shift
    "$@" >"$OUT" 2>"$ERR"
    rc=$?
    if [ "$rc" -ne 2 ] && [ "$rc" -lt 128 ]; then
        echo "ok - $name"
    else
        echo "not ok - $name (exit $rc)"
        sed 's/^/#   stderr: /' "$ERR" | head -n 5
    fi
}

# run VALUE-ARGS...: the command of the row with the value, $ARGS' @ a
# fresh path
run_row() {
    local args=${fixed//@/$T/new/$n}
    n=$((n + 1))
    # shellcheck disable=SC2086
    "$DLK" "$cmd" $args "$@"
}

while IFS='|' read -r cmd fixed opt good bad generic; do
    [ -n "$cmd" ] || continue
    case $generic in
    int) bad="$bad abc -1 18446744073709551617 EMPTY" ;;
    float) bad="$bad abc -1 nan inf EMPTY" ;;
    esac
    # how the option is named in the message, and how a value is given
    name=$opt
    form() { # VALUE -> the arguments
        local v=$1
        [ "$v" = EMPTY ] && v=
        case $opt in
        INDEX) printf '%s\n' "$v" ;;
        emb=) printf '%s\n' "emb=$v" ;;
        *) printf '%s\n' "$opt" "$v" ;;
        esac
    }
    [ "$opt" = emb= ] && name=--near
    for v in $good; do
        mapfile -t a < <(form "$v")
        accepted "$cmd $opt $v is accepted" run_row "${a[@]}"
    done
    for v in $bad; do
        mapfile -t a < <(form "$v")
        fails "$cmd $opt ${v} is a usage error" 2 run_row "${a[@]}"
        check "... naming $name" grep -qE -- "^dlk $cmd: $name: .*(is out of range \\(|is not )" "$ERR"
    done
done <<<"$table"

# the message as users see it
fails "bench-stream --batch-size 4294967297" 2 dlk bench-stream "$NO" --batch-size 4294967297
check "says the range" grep -qx -- "dlk bench-stream: --batch-size: 4294967297 is out of range (1 to 16777216)" "$ERR"
fails "--json: the error object too" 2 dlk bench-stream "$NO" --batch-size=-1 --json
check "... naming the option" python3 -c '
import json,sys; e=json.load(open(sys.argv[1]))["error"]
assert e["exit_code"]==2 and e["message"]=="--batch-size: -1 is out of range (1 to 16777216)", e' "$OUT"

# on a dataset that is there: values that once wrapped (4294967297 read
# as 1, -1 as 4294967295) ran and exited 0
DS=$T/ds
mkdir -p "$T/src"
python3 - "$T/src" <<'PY'
import struct, sys
for i in range(8):
    hdr = "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }"
    hdr += " " * (63 - len(hdr)) + "\n"
    with open(f"{sys.argv[1]}/{i:03d}_a.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + bytes([i] * 4))
PY
ok "a dataset of 8 rows" dlk create "$DS" --tensor a:u8:4
ok "its rows" dlk ingest "$DS" from-dir "$T/src" --quiet
ok "bench-stream runs" dlk bench-stream "$DS" --device cpu --batch-size 4 --json
for o in --batch-size --workers --prefetch --window --span-parts --epochs; do
    for v in 4294967297 -1; do
        fails "bench-stream $o $v on a dataset" 2 dlk bench-stream "$DS" --device cpu "$o" "$v"
        check "... names $o" grep -q -- "^dlk bench-stream: $o: $v is out of range" "$ERR"
    done
done
for a in "--k 4294967297" "--limit 4294967296" "--threads 4294967297"; do
    # shellcheck disable=SC2086
    fails "query $a on a dataset" 2 dlk query "$DS" --near a=0 $a
    check "... names ${a% *}" grep -q -- "^dlk query: ${a% *}: " "$ERR"
done
fails "log -n 18446744073709551617 on a dataset" 2 dlk log "$DS" -n 18446744073709551617
fails "cat INDEX 18446744073709551617 on a dataset" 2 dlk cat "$DS" a 18446744073709551617

#!/usr/bin/env bash
# --json on every exit: each command that takes --json prints exactly one
# JSON value on stdout whatever its exit status: its result (0, and 1 for
# verify), or {"error": {"message", "exit_code"}} for bad usage (2) and
# failures (3).
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "json exits" "ffmpeg missing"; exit 0; }

S=$T/src
mkdir -p "$S/c"
ff -f lavfi -i "testsrc2=s=64x48:r=25" -frames:v 6 -q:v 4 "$S/c/i%04d.jpg"
DS=$T/ds
ok "create a dataset" dlk create "$DS" from-dir "$S" --chunk-size 4K --quiet
ok "commit it" dlk commit "$DS" -m first

# one_json RC: stdout is exactly one JSON value; with RC != 0 an object
# whose error.exit_code is RC and whose error.message is the message on
# stderr
one_json() {
    python3 - "$OUT" "$ERR" "$1" <<'EOF'
import json, sys
out, err, rc = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3])
dec = json.JSONDecoder()
v, end = dec.raw_decode(out.lstrip())
assert out.lstrip()[end:].strip() == "", "more than one value: %r" % out
if rc not in (0, 1):
    assert isinstance(v, dict) and set(v["error"]) == {"message", "exit_code"}, v
    assert v["error"]["exit_code"] == rc, v
    assert v["error"]["message"] and v["error"]["message"] in err, (v, err)
else:
    assert not (isinstance(v, dict) and "error" in v), v
EOF
}

# exit 0
ok "ls --json" dlk ls "$DS" --json
check "ls: one object" one_json 0
ok "cat --json" dlk cat "$DS" labels 0 --json
check "cat: one object" one_json 0
ok "log --json" dlk log "$DS" --json
check "log: one value" one_json 0
ok "verify --json" dlk verify "$DS" --json
check "verify: one object" one_json 0
ok "gc --json" dlk gc "$DS" --dry-run --json
check "gc: one object" one_json 0
ok "create --json" dlk create "$T/new" --tensor x:u8 --json
check "create: one object" one_json 0
ok "ingest --json" dlk ingest "$DS" from-dir "$S" --json --no-resume
check "ingest: one object" one_json 0
ok "commit --json" dlk commit "$DS" -m second --json
check "commit: one object" one_json 0
ok "bench-stream --json" dlk bench-stream "$DS" --device cpu --json
check "bench-stream: one object" one_json 0

# exit 1: verify finds a damaged chunk
BAD=$T/bad
ok "a dataset to damage" dlk create "$BAD" from-dir "$S" --chunk-size 4K --quiet
key=$(first_chunk_key "$BAD" images)
flip_byte "$BAD/$key" 200
fails "verify --deep --json finds it (exit 1)" 1 dlk verify "$BAD" --deep --json
check "verify: one result object, no error member" one_json 1

# exit 2: bad usage, for every command that takes --json
fails "ls: missing DATASET" 2 dlk ls --json
check "ls: error object, exit_code 2" one_json 2
fails "cat: bad index" 2 dlk cat "$DS" labels x --json
check "cat: error object" one_json 2
fails "log: unknown flag" 2 dlk log "$DS" --json --bogus
check "log: error object" one_json 2
fails "verify: --at with --all" 2 dlk verify "$DS" --json --at main --all
check "verify: error object" one_json 2
fails "gc: extra argument" 2 dlk gc "$DS" extra --json
check "gc: error object" one_json 2
fails "commit: no message" 2 dlk commit "$DS" --json
check "commit: error object" one_json 2
fails "create: no tensor" 2 dlk create "$T/new2" --json
check "create: error object" one_json 2
fails "ingest: unknown source kind" 2 dlk ingest "$DS" from-ftp x --json
check "ingest: error object" one_json 2
fails "bench-stream: bad epochs" 2 dlk bench-stream "$DS" --epochs 0 --json
check "bench-stream: error object" one_json 2
fails "unknown command with --json" 2 dlk frobnicate --json
check "dlk: error object" one_json 2
fails "create: the dataset exists" 2 dlk create "$T/new" --tensor x:u8 --json
check "create exists: error object" one_json 2

# exit 3: failures
fails "ls: no dataset" 3 dlk ls "$T/none" --json
check "ls: error object, exit_code 3" one_json 3
fails "cat: no such sample" 3 dlk cat "$DS" labels 999 --json
check "cat: error object" one_json 3
fails "log: no dataset" 3 dlk log "$T/none" --json
check "log: error object" one_json 3
fails "verify: no dataset" 3 dlk verify "$T/none" --json
check "verify: error object" one_json 3
fails "gc: no dataset" 3 dlk gc "$T/none" --json
check "gc: error object" one_json 3
fails "commit: no dataset" 3 dlk commit "$T/none" -m x --json
check "commit: error object" one_json 3
fails "bench-stream: no dataset" 3 dlk bench-stream "$T/none" --device cpu --json
check "bench-stream: error object" one_json 3
fails "ingest: no dataset" 3 dlk ingest "$T/none" from-dir "$S" --json
check "ingest: error object" one_json 3
check "ingest: the summary comes with the error" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert "ingested" in d and "errors" in d, d' "$OUT"
mkdir -p "$T/junk"
for i in 1 2 3; do echo junk > "$T/junk/j$i.jpg"; done
fails "ingest: nothing but junk" 3 dlk ingest "$DS" from-dir "$T/junk" --json
check "ingest: error object" one_json 3
fails "create from junk" 3 dlk create "$T/fromjunk" from-dir "$T/junk" --json --tensor images:u8:?x?x3
check "create: error object" one_json 3

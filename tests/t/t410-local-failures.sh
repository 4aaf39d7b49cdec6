#!/usr/bin/env bash
# t410-local-failures.sh - local file-system failures: a full disk (a
# small tmpfs, else a loop-mounted ext4), a read-only file system (the
# same, remounted ro) and permission denied (the dataset owned by root,
# dlk run as nobody).  ingest, commit and gc each give a clear error -
# exit 3 and a message naming the object and the reason - or, where the
# failure cannot hurt them (gc on a full disk only deletes), succeed; and
# nothing half-written becomes visible: every commit and the head verify
# --deep (verify --all --deep), the log is unchanged, the earlier commit's
# samples are byte-identical, no temporary file is left behind, and once
# the fault is gone the same commands succeed.
. "$DLK_TESTS/lib.sh"

have_numpy || { skip "local failures" "numpy missing: python3 -m pip install numpy"; exit 0; }
if [ "$(id -u)" != 0 ]; then
    skip "local failures" "mounting a small file system needs root (run the suite as root, e.g. sudo make test)"
    exit 0
fi

# copies of dlk and the sources where nobody can read them
chmod 755 "$T"
mkdir -p "$T/bin"
cp "$DLK" "$T/bin/dlk" && chmod 755 "$T/bin/dlk"
DLK=$T/bin/dlk
gen() { python3 "$DLK_TESTS/../examples/sample_data.py" "$@" >/dev/null; }
gen "$T/src1" --samples 20 --size 48 --seed 1
gen "$T/src2" --samples 400 --size 48 --seed 2     # 2.8 MB: does not fit
gen "$T/src3" --samples 5 --size 48 --seed 3
chmod -R a+rX "$T/src1" "$T/src2" "$T/src3"

SPECS=(--tensor images:u8:48x48x3 --tensor labels:i32 --tensor 'boxes:f32:?x4:zstd'
       --classes labels=red,green,blue --chunk-size 16K)

dump() { # DATASET [--at REF]: name, index and sha1 of every sample
    python3 - "$DLK" "$@" <<'EOF'
import hashlib, json, subprocess, sys
dlk, url, at = sys.argv[1], sys.argv[2], sys.argv[3:]
m = json.loads(subprocess.check_output([dlk, "ls", url, "--json"] + at))
for t in m["tensors"]:
    for i in range(t["samples"]):
        b = subprocess.check_output([dlk, "cat", url, t["name"], str(i), "--raw"] + at)
        print(t["name"], i, hashlib.sha1(b).hexdigest())
EOF
}
log_sig() { "$DLK" log "$1" --json 2>&1; }
meta() { echo "$T/meta-$(basename "$1")"; }   # off the small file system

# intact NAME DATASET: what was committed is as it was
intact() {
    local name=$1 ds=$2
    check "$name: log unchanged" test "$(log_sig "$ds")" = "$(cat "$(meta "$ds").log")"
    ok "$name: verify --all --deep" dlk verify "$ds" --all --deep
    dump "$ds" --at main~0 >"$T/dump.now" 2>&1
    check "$name: main's samples byte-identical" cmp "$T/dump.now" "$(meta "$ds").dump"
    check "$name: no temporary file left" test -z "$(find "$ds" -name '.dlk-tmp-*' | head -n 1)"
}
# clear NAME WHAT REASON: the last command failed with exit 3 naming an
# object of the dataset and the reason
clear_error() {
    echo "# $1: $(head -n 1 "$ERR")"
    check "$1: the message names the object and says '$2'" \
        grep -qE "'[^']*$3[^']*'.*$2" "$ERR"
}
# start DATASET: a dataset with one commit, and a stray chunk for gc
start() {
    local ds=$1
    ok "setup $ds: create" dlk create "$ds" "${SPECS[@]}"
    # without key tensors: the failing ingests below append src1 again
    ok "setup $ds: ingest" dlk ingest "$ds" from-dir "$T/src1" --no-key --quiet
    ok "setup $ds: commit" dlk commit "$ds" -m base
    log_sig "$ds" >"$(meta "$ds").log"
    dump "$ds" --at main~0 >"$(meta "$ds").dump"
}
stray() { # DATASET: an unreferenced chunk, two hours old
    local c; c=$(find "$1/chunks/images" -type f | head -n 1)
    cp "$c" "$1/chunks/images/0123456789abcdef0123456789abcdef"
    touch -d '2 hours ago' "$1/chunks/images/0123456789abcdef0123456789abcdef"
}

# ---- a small file system -------------------------------------------------
MNT=$T/mnt
mkdir -p "$MNT"
fs=
if mount -t tmpfs -o size=2m,mode=0755 tmpfs "$MNT" 2>"$T/mount.err"; then
    fs=tmpfs
else
    truncate -s 4M "$T/fs.img"
    if command -v mkfs.ext4 >/dev/null && mkfs.ext4 -q -F -m 0 "$T/fs.img" 2>>"$T/mount.err" &&
       mount -o loop "$T/fs.img" "$MNT" 2>>"$T/mount.err"; then
        fs=ext4-loop
    fi
fi
if [ -n "$fs" ]; then
    at_exit "umount -l '$MNT' 2>/dev/null"
    echo "ok - a small $fs mounted at $MNT"
else
    skip "disk full and read-only file system" "neither 'mount -t tmpfs' nor a loop-mounted ext4 works here: $(tr '\n' ' ' <"$T/mount.err" | head -c 300)"
fi

if [ -n "$fs" ]; then
    # ---- disk full ----
    D=$MNT/full
    start "$D"
    fails "disk full: ingest of 2.8 MB into 2 MB" 3 dlk ingest "$D" from-dir "$T/src2" --no-key --quiet
    clear_error "disk full: ingest" "No space left on device" "$D"
    intact "disk full: ingest" "$D"
    ok "after the failed ingest: ls" dlk ls "$D"
    rm -rf "$D/staging/ingest"/*/ 2>/dev/null   # forget the failed run's progress
    ok "disk full: gc of what the failed ingest left (frees space)" dlk gc "$D" --grace 0
    intact "disk full: after gc" "$D"

    ok "disk full: a small ingest (head ahead of main)" dlk ingest "$D" from-dir "$T/src3" --no-key --quiet
    stray "$D"
    dd if=/dev/zero of="$MNT/filler" bs=4k 2>/dev/null
    check "the disk is full" test "$(df --output=avail "$MNT" | tail -n 1 | tr -d ' ')" -lt 8
    fails "disk full: commit" 3 dlk commit "$D" -m full
    clear_error "disk full: commit" "No space left on device" "$D"
    intact "disk full: commit" "$D"
    fails "disk full: ingest" 3 dlk ingest "$D" from-dir "$T/src1" --no-key --quiet --no-resume
    clear_error "disk full: second ingest" "No space left on device" "$D"
    intact "disk full: second ingest" "$D"
    # gc only deletes: on a full disk it works (or fails clearly)
    dlk gc "$D" --json >"$OUT" 2>"$ERR"; rc=$?
    if [ $rc -eq 3 ]; then
        clear_error "disk full: gc" "No space left on device" "$D"
    else
        check "disk full: gc exits 0 or 3 (exit $rc)" test $rc -eq 0
        check "disk full: gc removed the stray chunk" test ! -e "$D/chunks/images/0123456789abcdef0123456789abcdef"
    fi
    intact "disk full: gc" "$D"
    if [ "$fs" = tmpfs ]; then
        # room for exactly one small object (a tmpfs counts pages): the
        # commit's probe of conditional writes gets its first object in,
        # not the second; the failure must be blamed on the disk
        dd if=/dev/zero of="$MNT/filler2" bs=4k 2>/dev/null  # gc freed some
        truncate -s -4096 "$MNT/filler"
        check "one page free" test "$(df -B1 --output=avail "$MNT" | tail -n 1 | tr -d ' ')" -eq 4096
        fails "disk full, one page free: commit" 3 dlk commit "$D" -m one-page
        clear_error "disk full, one page free: commit" "No space left on device" "$D"
        check "disk full, one page free: not blamed on the store's conditional writes" \
            sh -c "! grep -q 'not honour conditional writes' '$ERR'"
        intact "disk full, one page free: commit" "$D"
        # without the probe: the commit object fits, main's update does not
        fails "disk full, one page free: commit --unsafe-single-writer" 3 \
            dlk commit "$D" -m one-page --unsafe-single-writer
        clear_error "disk full, one page free: commit --unsafe-single-writer" "No space left on device" "$D"
        intact "disk full, one page free: commit --unsafe-single-writer" "$D"
    fi
    rm -f "$MNT/filler" "$MNT/filler2"
    ok "space again: commit" dlk commit "$D" -m after-full
    ok "space again: verify --all --deep" dlk verify "$D" --all --deep
    ok "space again: log" dlk log "$D" --json
    check "two commits" python3 -c '
import json,sys; assert [c["message"] for c in json.load(open(sys.argv[1]))]==["after-full","base"]' "$OUT"
    dump "$D" --at main~1 >"$T/dump.base"
    check "the first commit's samples are still byte-identical" cmp "$T/dump.base" "$(meta "$D").dump"
    rm -rf "$D"

    # ---- read-only file system ----
    R=$MNT/ro
    start "$R"
    ok "ro: a small ingest (head ahead of main)" dlk ingest "$R" from-dir "$T/src3" --no-key --quiet
    stray "$R"
    log_sig "$R" >"$(meta "$R").log"
    if mount -o remount,ro "$MNT" 2>"$T/remount.err"; then
        at_exit "mount -o remount,rw '$MNT' 2>/dev/null"
        fails "read-only fs: ingest" 3 dlk ingest "$R" from-dir "$T/src1" --no-key --quiet --no-resume
        clear_error "read-only fs: ingest" "Read-only file system" "$R"
        fails "read-only fs: commit" 3 dlk commit "$R" -m ro
        clear_error "read-only fs: commit" "Read-only file system" "$R"
        fails "read-only fs: gc" 3 dlk gc "$R"
        clear_error "read-only fs: gc" "Read-only file system" "$R"
        ok "read-only fs: ls still works" dlk ls "$R"
        ok "read-only fs: cat still works" dlk cat "$R" images 3 --raw
        ok "read-only fs: bench-stream still works" dlk bench-stream "$R" --device cpu --batch-size 8
        intact "read-only fs" "$R"
        mount -o remount,rw "$MNT"
        ok "read-write again: commit" dlk commit "$R" -m after-ro
        ok "read-write again: gc" dlk gc "$R" --json
        check "gc removed the stray chunk" test ! -e "$R/chunks/images/0123456789abcdef0123456789abcdef"
        ok "read-write again: verify --all --deep" dlk verify "$R" --all --deep
    else
        skip "read-only file system" "mount -o remount,ro failed: $(head -c 200 "$T/remount.err")"
    fi
fi

# ---- permission denied: the dataset is root's, dlk runs as nobody ----
as_nobody=()
if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
elif command -v runuser >/dev/null && runuser -u nobody -- true 2>/dev/null; then
    as_nobody=(runuser -u nobody --)
fi
if [ ${#as_nobody[@]} -eq 0 ]; then
    skip "permission denied" "cannot run a command as nobody (root bypasses permissions): apt-get install -y util-linux (setpriv)"
    exit 0
fi
P=$T/perm
start "$P"
ok "perm: a small ingest (head ahead of main)" dlk ingest "$P" from-dir "$T/src3" --no-key --quiet
stray "$P"
log_sig "$P" >"$(meta "$P").log"
chmod -R go-w "$P"
check "the dataset is not writable by others" test -z "$(find "$P" -perm -o+w | head -n 1)"
fails "permission denied: ingest" 3 "${as_nobody[@]}" "$DLK" ingest "$P" from-dir "$T/src1" --no-key --quiet --no-resume
clear_error "permission denied: ingest" "Permission denied" "$P"
fails "permission denied: commit" 3 "${as_nobody[@]}" "$DLK" commit "$P" -m perm
clear_error "permission denied: commit" "Permission denied" "$P"
fails "permission denied: gc" 3 "${as_nobody[@]}" "$DLK" gc "$P"
clear_error "permission denied: gc" "Permission denied" "$P"
ok "permission denied: reading works (verify --all --deep as nobody)" "${as_nobody[@]}" "$DLK" verify "$P" --all --deep
ok "permission denied: cat as nobody" "${as_nobody[@]}" "$DLK" cat "$P" labels 2 --json
intact "permission denied" "$P"
check "the stray chunk is still there" test -e "$P/chunks/images/0123456789abcdef0123456789abcdef"
ok "as the owner: commit" dlk commit "$P" -m owner
ok "as the owner: gc" dlk gc "$P"
ok "as the owner: verify --all --deep" dlk verify "$P" --all --deep

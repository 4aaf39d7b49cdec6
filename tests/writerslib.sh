# tests/writerslib.sh - writers racing on one dataset, a trial at a time,
# judged by which rows the head holds (t149, t345, tests/bench/writers.sh).
#
#   . "$DLK_TESTS/lib.sh"; . "$DLK_TESTS/mixlib.sh"; mix_need NAME
#   . "$DLK_TESTS/writerslib.sh"
#   wr_init DS            create DS from 4 JPEG rows and commit it (base)
#   wr_trial DS OP...     start every OP at once and wait for them all; OP is
#                         ingest:N (from-dir of a folder of N new JPEGs of
#                         its own), commit, compact, gc or view (query
#                         --save-view); then check the trial (below)
#   wr_ops K EQUAL        K random OPs, at least one ingest; EQUAL 1: every
#                         ingest of the trial has the same row count
#
# A trial is right when every writer exited 0 or 4 (an ingest that exits 4
# names the other writer), the head's rows are exactly those it held
# before plus those of every ingest that exited 0, each once (told apart by
# the names of the rows' source files: each run's are its own), and
# dlk verify --all --deep passes.  Counters: WR_TRIALS, WR_WRITERS,
# WR_LOSSES (writers that exited 4), WR_WRONG (trials whose head was not
# exactly that), WR_BADEXIT (other exits, or a loss not named as one),
# WR_BADVERIFY; WR_LAST says what was wrong with the last trial.

WR_TRIALS=0 WR_WRITERS=0 WR_LOSSES=0 WR_WRONG=0 WR_BADEXIT=0 WR_BADVERIFY=0
WR_LAST=
_wr_n=0

# _wr_src DIR:TAG:N...: N 8x8 JPEGs DIR/class00/TAG-NNNN.jpg for each, every
# image new: taken from a pool made 1000 at a time (one Python start for
# many trials: on a busy machine it takes longer than the trial)
_wr_pool=0 _wr_used=0
_wr_src() {
    local arg d tag n i
    for arg in "$@"; do
        d=${arg%%:*} n=${arg##*:} tag=${arg#*:} tag=${tag%:*}
        mkdir -p "$d/class00" || return 1
        for ((i = 0; i < n; i++)); do
            if [ $_wr_used -ge $_wr_pool ]; then
                python3 - "$T/wr-pool" $_wr_pool 1000 <<'PY' || return 1
import os, sys
import numpy as np
from PIL import Image
d, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(start + 1)
for i in range(start, start + n):
    Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(
        os.path.join(d, "%07d.jpg" % i), quality=90)
PY
                _wr_pool=$((_wr_pool + 1000))
            fi
            mv "$T/wr-pool/$(printf %07d $_wr_used).jpg" \
                "$d/class00/$(printf '%s-%04d' "$tag" $i).jpg" || return 1
            _wr_used=$((_wr_used + 1))
        done
    done
}

# wr_keys DS: the file names of the head's rows' keys, sorted, one a line
# (the keys here are plain: no escapes in the JSON)
wr_keys() {
    "$DLK" query "$1" --show key --json 2>"$T/wr-keys.err" >"$T/wr-keys.json" ||
        return 1
    grep -o '"key":"[^"]*"' "$T/wr-keys.json" | sed 's/^"key":"//; s/"$//; s|.*/||' |
        LC_ALL=C sort
}

wr_init() {
    rm -rf "$T/wr-base"
    _wr_src "$T/wr-base:base:4" &&
        "$DLK" create "$1" from-dir "$T/wr-base" --quiet >/dev/null &&
        "$DLK" commit "$1" -m base >/dev/null || return 1
    wr_keys "$1" >"$T/wr-want"
}

wr_ops() {
    local k=$1 equal=$2 n=$((2 + RANDOM % 3)) i ops=() kinds
    kinds=(ingest ingest ingest commit compact gc view)
    for ((i = 0; i < k; i++)); do
        local op=${kinds[RANDOM % ${#kinds[@]}]}
        [ $i -eq 0 ] && op=ingest
        [ "$op" = ingest ] && op=ingest:$([ "$equal" = 1 ] && echo $n || echo $((2 + RANDOM % 3)))
        ops+=("$op")
    done
    echo "${ops[@]}"
}

wr_trial() {
    local ds=$1 i op pids=() rcs=() tags=() bad= rc
    shift
    _wr_n=$((_wr_n + 1))
    local dir=$T/wr-$_wr_n
    mkdir -p "$dir"
    local srcs=()
    for ((i = 1; i <= $#; i++)); do
        op=${!i}
        tags[i]=t${_wr_n}w$i
        case $op in
        ingest:*) srcs+=("$dir/${tags[i]}:${tags[i]}:${op#ingest:}") ;;
        esac
    done
    _wr_src "${srcs[@]}" || return 1
    for ((i = 1; i <= $#; i++)); do
        op=${!i}
        case $op in
        ingest:*) "$DLK" ingest "$ds" from-dir "$dir/${tags[i]}" --quiet ;;
        commit) "$DLK" commit "$ds" -m "${tags[i]}" ;;
        compact) "$DLK" compact "$ds" ;;
        gc) "$DLK" gc "$ds" ;;
        view) "$DLK" query "$ds" "random(1) < 0.5" --save-view "v$i" ;;
        esac >"$dir/$i.out" 2>"$dir/$i.err" &
        pids[i]=$!
    done
    for ((i = 1; i <= $#; i++)); do
        wait "${pids[i]}"
        rcs[i]=$?
    done
    WR_TRIALS=$((WR_TRIALS + 1))
    WR_WRITERS=$((WR_WRITERS + $#))
    for ((i = 1; i <= $#; i++)); do
        op=${!i}
        rc=${rcs[i]}
        if [ "$rc" -eq 4 ]; then
            WR_LOSSES=$((WR_LOSSES + 1))
            case $op in ingest:*)
                grep -q "another writer" "$dir/$i.err" ||
                    bad+=" $op lost without naming the other writer:$(head -c 200 "$dir/$i.err")" ;;
            esac
        elif [ "$rc" -ne 0 ]; then
            bad+=" $op exited $rc:$(head -c 200 "$dir/$i.err")"
        elif [ "${op%%:*}" = ingest ]; then
            ls "$dir/${tags[i]}/class00" >>"$T/wr-want"
        fi
    done
    WR_LAST="$*: exits ${rcs[*]}"
    [ -n "$bad" ] && WR_BADEXIT=$((WR_BADEXIT + 1)) && WR_LAST+=";$bad"
    LC_ALL=C sort -o "$T/wr-want" "$T/wr-want"
    if ! wr_keys "$ds" >"$dir/head" || ! cmp -s "$dir/head" "$T/wr-want"; then
        WR_WRONG=$((WR_WRONG + 1))
        WR_LAST+="; head holds $(wc -l <"$dir/head") rows, want $(wc -l <"$T/wr-want"):$(diff "$T/wr-want" "$dir/head" | grep '^[<>]' | head -4 | tr '\n' ' ')"
        bad+=" wrong head"
        # go on from what the head holds
        cp "$dir/head" "$T/wr-want"
    fi
    if ! "$DLK" verify "$ds" --all --deep >"$dir/verify" 2>&1; then
        WR_BADVERIFY=$((WR_BADVERIFY + 1))
        WR_LAST+="; verify: $(grep -v '^ok' "$dir/verify" | head -2 | tr '\n' ' ')"
        bad+=" verify"
    fi
    [ -z "$bad" ] && rm -rf "$dir"
    [ -z "$bad" ]
}

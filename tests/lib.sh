# tests/lib.sh - helpers for the CLI test scripts in tests/t/.
#
#   . "$DLK_TESTS/lib.sh"
#   ok   "name" CMD...          CMD must exit 0
#   fails "name" CODE CMD...    CMD must exit with CODE (not a signal)
#   check "name" CMD...         like ok, for assertions (test, grep, cmp)
#   skip "name" "why"
# Each CMD's stdout/stderr land in $OUT and $ERR.  A command killed by a
# signal (exit >= 128) is always a failure: a crash never passes for an
# expected error.  $T is a fresh directory removed at exit.
set -u
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-test.XXXXXX")
OUT=$T/.stdout
ERR=$T/.stderr
_cleanups=()
at_exit() { _cleanups+=("$*"); }
_run_cleanups() {
    local c
    for c in "${_cleanups[@]+"${_cleanups[@]}"}"; do eval "$c"; done
    rm -rf "$T"
}
trap _run_cleanups EXIT

_report() { # name rc expected
    local name=$1 rc=$2 want=$3
    if [ "$rc" -ge 128 ] && [ "$want" -lt 128 ]; then
        echo "not ok - $name (killed by signal $((rc - 128)))"
    elif [ "$rc" -eq "$want" ]; then
        echo "ok - $name"
        return 0
    else
        echo "not ok - $name (exit $rc, expected $want)"
    fi
    sed 's/^/#   stderr: /' "$ERR" | head -n 15
    return 1
}

ok() {
    local name=$1; shift
    "$@" >"$OUT" 2>"$ERR"
    _report "$name" $? 0
}

fails() {
    local name=$1 want=$2; shift 2
    "$@" >"$OUT" 2>"$ERR"
    _report "$name" $? "$want"
}

check() { ok "$@"; }

skip() { echo "ok - $1 # SKIP $2"; }

dlk() { "$DLK" "$@"; }

# Python with numpy, for reading what dlk writes independently.
have_numpy() { python3 -c 'import numpy' 2>/dev/null; }

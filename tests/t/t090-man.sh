#!/usr/bin/env bash
# The man pages: each renders without a warning, every command in the
# table of cmd/dlk.c has its page and its entry in dlk(1), and every
# option of a command's getopt table, every exit code of cmd/cmd.h and
# every AWS_/DLK_ variable the code reads is documented.  So a flag, a
# command or a variable added without its docs fails here.
. "$DLK_TESTS/lib.sh"

root=$(cd "$DLK_TESTS/.." && pwd)
man_dir=$root/man
cmd_dir=$root/cmd

# The page's source with roff escapes for '-' and fonts removed, so that
# "\-\-chunk\-size" reads "--chunk-size".
plain() {
    sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\f(..//g' \
        -e 's/\\&//g' -e 's/\\(aq/'"'"'/g' "$1"
}

# documents PAGE WORD: WORD appears in PAGE as a whole word (an option
# such as --json must not be found inside --json-lines).
documents() {
    plain "$1" | grep -qE -- "(^|[^A-Za-z0-9_-])$2([^A-Za-z0-9_-]|\$)" || {
        echo "'$2' is not in ${1#"$root"/}" >&2
        return 1
    }
}

# Rendering: no warning from man (and groff, when present) at 80 columns.
render_man() {
    MANWIDTH=80 man --warnings -E UTF-8 -l "$1" >/dev/null 2>"$T/warn" || {
        cat "$T/warn" >&2
        return 1
    }
    if [ -s "$T/warn" ]; then
        cat "$T/warn" >&2
        return 1
    fi
}
render_groff() {
    groff -man -Tutf8 -ww -z "$1" 2>"$T/warn" || {
        cat "$T/warn" >&2
        return 1
    }
    if [ -s "$T/warn" ]; then
        cat "$T/warn" >&2
        return 1
    fi
}

pages=("$man_dir"/*.1)
if [ ! -e "${pages[0]}" ]; then
    echo "not ok - man pages exist (none in man/)"
    exit 1
fi

have_man=false have_groff=false
command -v man >/dev/null 2>&1 && command -v groff >/dev/null 2>&1 &&
    have_man=true
command -v groff >/dev/null 2>&1 && have_groff=true
for p in "${pages[@]}"; do
    n=${p#"$root"/}
    if $have_man; then
        ok "$n renders with man, no warnings" render_man "$p"
    fi
    if $have_groff; then
        ok "$n renders with groff -ww, no warnings" render_groff "$p"
    else
        skip "$n renders" "neither man nor groff is installed (apt-get install man-db groff-base)"
    fi
done

# The commands: the rows { "name", cmd_fn, ... } of the table in dlk.c.
verbs=$(sed -n 's/^ *{ *"\([a-z][a-z0-9-]*\)", *cmd_[a-z0-9_]*,.*/\1/p' \
    "$cmd_dir/dlk.c")
check "cmd/dlk.c has a command table" test -n "$verbs"
for v in $verbs; do
    page=$man_dir/dlk-$v.1
    check "dlk-$v.1 exists" test -f "$page"
    check "dlk.1 lists $v" grep -qxE "\.BR? $v( .*)?" "$man_dir/dlk.1"
    [ -f "$page" ] || continue
    check "dlk.1 refers to dlk-$v(1)" documents "$man_dir/dlk.1" "dlk-$v"
    # the file that defines cmd_<verb>
    fn=cmd_$(printf %s "$v" | tr - _)
    src=$(grep -lE "^int $fn\(int argc" "$cmd_dir"/*.c | head -n 1)
    if [ -z "$src" ]; then
        echo "not ok - source of dlk $v (no 'int $fn(int argc' in cmd/)"
        continue
    fi
    # rows shared by ingest and create (ingest_cli_options) count for
    # every command that uses them
    shared=
    grep -q "ingest_cli_options" "$src" && shared=$cmd_dir/ingest_opts.c
    # the options: rows of a getopt table { "name", required_argument, ...
    # or of an options table (cmd/options.h): CMD_OPT_UINT("name", 'n', ...
    # and CMD_OPT_HELP() (--help, -h)
    longs=$({ grep -ohE '\{ *"[a-z0-9][a-z0-9-]*", *(no|required|optional)_argument' \
                  "$src" $shared | sed -E 's/^\{ *"([^"]*)".*/\1/'
              grep -ohE 'CMD_OPT_[A-Z_]+\( *"[a-z0-9][a-z0-9-]*"' "$src" $shared |
                  sed -E 's/.*"([^"]*)"/\1/'
              grep -qE 'CMD_OPT_HELP(_TEXTS)?\(' "$src" && echo help; } | sort -u)
    check "${src#"$root"/} has an options table" test -n "$longs"
    for o in $longs; do
        check "dlk-$v.1 documents --$o" documents "$page" "--$o"
    done
    # short options from the getopt_long optstring, such as "qh" or "m:h",
    # or the rows' letters
    shorts=$({ sed -n 's/.*getopt_long([^"]*"\([^"]*\)".*/\1/p' "$src" |
                   tr -d ':+-' | fold -w1
               grep -ohE "CMD_OPT_[A-Z_]+\\( *\"[a-z0-9-]+\", *'[A-Za-z0-9]'" "$src" $shared |
                   sed -E "s/.*'(.)'/\\1/"
               grep -qE 'CMD_OPT_HELP(_TEXTS)?\(' "$src" && echo h; } | sort -u)
    for o in $shorts; do
        check "dlk-$v.1 documents -$o" documents "$page" "-$o"
    done
done
# and no page for a command the binary does not have
for p in "$man_dir"/dlk-*.1; do
    [ -e "$p" ] || continue
    v=$(basename "$p" .1)
    v=${v#dlk-}
    check "dlk $v (of man/dlk-$v.1) is a command" \
        grep -qE "^ *\{ *\"$v\", *cmd_" "$cmd_dir/dlk.c"
done

# Exit codes: each value in cmd/cmd.h is an entry of EXIT STATUS in dlk.1.
codes=$(sed -n 's/^ *EXIT_[A-Z_]* *= *\([0-9][0-9]*\).*/\1/p' "$cmd_dir/cmd.h")
check "cmd/cmd.h has exit codes" test -n "$codes"
for c in $codes; do
    check "dlk.1 documents exit status $c" \
        grep -qx "\.B $c" "$man_dir/dlk.1"
done

# Environment: every "AWS_...", "DLK_...", "GOOGLE_..." or "STORAGE_..."
# string the code reads (by a call, or from a table of variables:
# cmd/store_env.c).
vars=$(grep -rhoE '((getenv|env_[a-z]+|aws_file)\(|\{)"(AWS|DLK|GOOGLE|STORAGE)_[A-Z0-9_]+"' \
    "$root/lib" "$cmd_dir" | sed -E 's/.*"([A-Z0-9_]+)"/\1/' | sort -u)
check "the code reads some environment" test -n "$vars"
for e in $vars; do
    check "dlk.1 documents $e" documents "$man_dir/dlk.1" "$e"
done

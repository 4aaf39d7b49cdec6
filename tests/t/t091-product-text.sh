#!/usr/bin/env bash
# The repository speaks of the product: no tracked text file (the
# benchmark outputs in tests/bench/results/ and their notes included)
# holds a word of tests/process-words.txt (how the work was done, not
# what dlk does);
# every subcommand's --help ends with an example; and libdlk.so exports
# only functions that the installed headers (include/*.h) declare.
. "$DLK_TESTS/lib.sh"
root=$(cd "$DLK_TESTS/.." && pwd)

# ---- process words -------------------------------------------------------
words=$root/tests/process-words.txt
pattern=$(grep -v '^#' "$words" | grep . | sed 's/.*/(?:&)/' | paste -sd'|')
check "tests/process-words.txt has patterns" test -n "$pattern"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # every tracked file but the word list; grep -I passes over binaries
    git -C "$root" ls-files -z | grep -zvxF tests/process-words.txt >"$T/files"
    check "git lists the tracked files" test -s "$T/files"
    check "the benchmark results are among them" \
        grep -qzE '^tests/bench/results/.+[.]txt$' "$T/files"
    (cd "$root" && xargs -0 grep -nIHP -i -- "$pattern" <"$T/files") >"$T/hits"
    if [ -s "$T/hits" ]; then
        sed 's/^/# /' "$T/hits" | head -n 40
    fi
    check "no process words in tracked text ($(wc -l <"$T/hits") lines)" \
        test ! -s "$T/hits"
    # the pattern does find such text (so that a broken pattern fails)
    # (the words are split here so that this file passes its own check)
    printf 'measured in %s 9 on the 2-core %s (%s 23)\n' "sess""ion" "V""M" \
        "iss""ue" >"$T/probe"
    check "the word list finds a planted line" grep -qP -i -- "$pattern" "$T/probe"
    printf 'AWS_SESSION_TOKEN: a session token\n' >"$T/probe"
    check "the word list leaves the session token alone" \
        sh -c '! grep -qP -i -- "$1" "$2"' sh "$pattern" "$T/probe"
else
    skip "no process words in tracked text" "not a git checkout (git ls-files names the tracked files)"
fi

# ---- every --help ends with an example -----------------------------------
verbs=$(sed -n 's/^ *{ *"\([a-z][a-z0-9-]*\)", *cmd_[a-z0-9_]*,.*/\1/p' \
    "$root/cmd/dlk.c")
check "cmd/dlk.c has a command table" test -n "$verbs"
# the last paragraph: "Example:" or "Examples:", then "  dlk VERB ..."
has_example() { # VERB FILE
    awk -v v="$1" '
        /^Examples?:$/ { ex = 1; n = 0; next }
        ex && $0 ~ "^  +dlk " v "( |$)" { n++ }
        ex && /^[^ ]/ { ex = 0; n = 0 }
        END { exit !(n >= 1) }' "$2"
}
for v in $verbs; do
    ok "dlk $v --help" dlk "$v" --help
    check "dlk $v --help ends with an example" has_example "$v" "$OUT"
done

# ---- libdlk.so exports only the public headers' functions ----------------
so=$DLK_BUILD/libdlk.so
if [ -e "$so" ] && command -v nm >/dev/null 2>&1; then
    nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRWVi]$/ { print $3 }' |
        sed 's/@.*//' | sort -u >"$T/exported"
    check "libdlk.so exports functions" test -s "$T/exported"
    grep -ohE '\b[a-z_][a-z0-9_]*[ ]*\(' "$root"/include/*.h |
        sed 's/[ (]*$//' | sort -u >"$T/declared"
    comm -23 "$T/exported" "$T/declared" >"$T/extra"
    [ -s "$T/extra" ] && sed 's/^/# exported, not in include\/: /' "$T/extra"
    check "every exported symbol is declared in include/" test ! -s "$T/extra"
else
    skip "libdlk.so exports" "no $so (make shared) or no nm (apt-get install binutils)"
fi

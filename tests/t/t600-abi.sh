#!/usr/bin/env bash
# The versioned structs (dlk.h, "Versioned structs"): a program built
# against an older header, whose dlk_loader_opts, dlk_loader_stats,
# dlk_ingest_opts, dlk_select_opts, dlk_select_result, dlk_verify_opts,
# dlk_verify_result, dlk_gc_result and dlk_compact_result end earlier,
# runs on today's libdlk.so: the library
# reads and writes only the bytes its header had (guard bytes after each
# struct stay as they were) and the fields it lacks take their defaults.
# And the shared library exports dlk.h's functions (version DLK_0) and
# dlk_bench.h's (DLK_PRIVATE_BENCH), nothing else; and libdlk.a defines no
# dlk_ name the headers do not declare.
. "$DLK_TESTS/lib.sh"
root=$DLK_TESTS/..
so=$DLK_BUILD/libdlk.so
sanflags=
[ -n "${SAN:-}" ] && sanflags="-fsanitize=address,undefined"

# The older header: each struct cut after the member named.
mkdir -p "$T/old" "$T/new"
cp "$root/include/dlk.h" "$root/include/dlk_bench.h" "$T/new/"
ok "an older header made by cutting the versioned structs" python3 - "$root/include/dlk.h" "$T/old/dlk.h" <<'PY'
import sys
text = open(sys.argv[1]).read().split("\n")
cuts = {"dlk_loader_opts": "uint32_t rank, world_size;",
        "dlk_loader_stats": "uint32_t io_threads;",
        "dlk_ingest_opts": '"file://DIR" or DIR */',
        "dlk_select_opts": 'const char *view;',
        "dlk_select_result": 'uint64_t n;',
        "dlk_verify_opts": "int deep;",
        "dlk_verify_result": "uint64_t problems;",
        "dlk_gc_result": "uint64_t removed, removed_bytes;",
        "dlk_compact_result": "uint64_t chunks_before, chunks_after;"}
out, inside, cutting = [], None, False
for line in text:
    if line.startswith("typedef struct ") and line.endswith("{"):
        inside = line.split()[2]
    if inside and line.startswith("} %s;" % inside):
        inside, cutting = None, False
    elif cutting:
        continue
    out.append(line)
    if inside in cuts and cuts[inside] in line:
        del cuts[inside]
        cutting = True
if cuts:
    sys.exit("cut points not found: %s" % ", ".join(cuts))
open(sys.argv[2], "w").write("\n".join(out))
PY
for h in old new; do
    ok "the caller builds against the $h header" sh -c "cc -O1 -Wall -Wextra -Werror $sanflags -I'$T/$h' '$root/tests/abi/caller.c' -L'$DLK_BUILD' -ldlk -Wl,-rpath,'$DLK_BUILD' -o '$T/$h/caller'"
    ok "the $h caller loads a dataset" "$T/$h/caller" "$T/ds-$h"
    cp "$OUT" "$T/$h.out"
done
[ -n "${T600_KEEP:-}" ] && cp "$T"/*.out "$T600_KEEP"/
val() { awk -v k="$2" '$1 == k { print $2 }' "$T/$1.out"; }
check "the older layouts are smaller" test "$(val old opts_size)" -lt "$(val new opts_size)" -a "$(val old stats_size)" -lt "$(val new stats_size)"
for h in old new; do
    check "$h: no FAIL line" sh -c "! grep -q '^FAIL' '$T/$h.out'"
    check "$h: size 0 options refused, naming the struct" sh -c "grep -q '^size0 1 dlk_loader_opts.size is 0' '$T/$h.out' && grep -q '^ingest_size0 1 dlk_ingest_opts.size is 0' '$T/$h.out'"
    check "$h: nothing read past the options (guard intact), every sample loaded" sh -c "test '$(val $h opts_guard)' = 1 && test '$(val $h samples)' = 100"
    check "$h: stats of size 0 untouched" test "$(val $h stats0_untouched)" = 1
    check "$h: stats written up to the caller's size only, size kept" sh -c "test '$(val $h stats_guard)' = 1 && test '$(val $h stats_size_kept)' = 1 && test '$(val $h init_size_kept)' = 1"
    check "$h: a result of size 0 refused" grep -q '^result_size0 1 dlk_select_result.size is 0' "$T/$h.out"
    check "$h: a query reads and fills only the caller's structs, freed with its size kept" sh -c "test '$(val $h select_n)' = 10 && test '$(val $h select_last)' = 9 && test '$(val $h select_guards)' = 1"
    check "$h: verify, gc and store options of size 0 refused, naming the struct" sh -c "grep -q '^verify_size0 1 dlk_verify_result.size is 0' '$T/$h.out' && grep -q '^gc_size0 1 dlk_gc_opts.size is 0' '$T/$h.out' && grep -q '^store_size0 1 dlk_store_options.size is 0' '$T/$h.out'"
    check "$h: verify, gc and compact read and fill only the caller's structs" sh -c "test '$(val $h verify_guards)' = 1 && test '$(val $h gc_guards)' = 1 && test '$(val $h compact_guards)' = 1 && test '$(val $h store_guard)' = 1"
    check "$h: verify checked the chunk deeply and found nothing; gc and compact saw it" sh -c "test '$(val $h verify_chunks)' = 1 && test '$(val $h verify_problems)' = 0 && test '$(val $h gc_removed)' = 0 && test '$(val $h compact_before)' = 1"
    check "$h: the stats the caller has are filled" sh -c "test '$(val $h batches)' = 10 && test '$(val $h stats_samples)' = 100"
done
# local_world_size (absent from the old layout) defaults to 1: the same
# I/O threads as a caller that has it and leaves it 0
check "the fields an old caller lacks take their defaults" test "$(val old io_threads)" = "$(val new io_threads)" -a "$(val new io_threads)" -gt 0

# Exported symbols: each in dlk.h at DLK_0 or dlk_bench.h at DLK_PRIVATE_BENCH.
objdump -T "$so" | awk '$2 == "g" && $4 != "*UND*" && $4 != "*ABS*" { print $(NF-1), $NF }' > "$T/syms"
check "the library exports functions" test "$(wc -l < "$T/syms")" -gt 50
stray=
while read -r ver sym; do
    case $ver in
    DLK_0) h=dlk.h ;;
    DLK_PRIVATE_BENCH) h=dlk_bench.h ;;
    *) stray="$stray $ver:$sym"; continue ;;
    esac
    grep -q "^DLK_API .*[ *]$sym(" "$root/include/$h" || stray="$stray $ver:$sym"
done < "$T/syms"
check "every exported symbol is declared in its version's header" test -z "$stray" || echo "#   stray:$stray"
missing=
for sym in $(sed -n 's/^DLK_API .*[ *]\(dlk_[a-z0-9_]*\)(.*/\1/p' "$root/include/dlk.h"); do
    grep -qx "DLK_0 $sym" "$T/syms" || missing="$missing $sym"
done
check "every dlk.h function is exported at DLK_0" test -z "$missing" || echo "#   missing:$missing"
check "dlk_bench.h's hooks are not in the stable node" sh -c "! grep -q '^DLK_0 dlk_loader_checksums\$' '$T/syms' && grep -q '^DLK_PRIVATE_BENCH dlk_loader_checksums\$' '$T/syms'"

# The static library: a dlk_ name it defines is one the headers declare
# (the rest of lib/ shares Dlk_ or a layer's prefix), so a program that
# links libdlk.a and names its own functions dlk_... meets only the API.
nm -g --defined-only "$DLK_BUILD/libdlk.a" | awk 'NF == 3 && $3 ~ /^dlk_/ { print $3 }' | sort -u > "$T/static_dlk"
sed -n 's/^DLK_API .*[ *]\(dlk_[a-z0-9_]*\)(.*/\1/p' "$root/include/dlk.h" "$root/include/dlk_bench.h" | sort -u > "$T/api"
check "libdlk.a defines dlk_ functions" test "$(wc -l < "$T/static_dlk")" -gt 50
check "every dlk_ symbol of libdlk.a is declared in a public header" test -z "$(comm -23 "$T/static_dlk" "$T/api")" || echo "#   internal dlk_ names: $(comm -23 "$T/static_dlk" "$T/api" | head -20 | tr '\n' ' ')"

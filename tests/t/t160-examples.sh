#!/usr/bin/env bash
# The examples a user copies build against the installed library (make
# install into a staging prefix, pkg-config) and run.
. "$DLK_TESTS/lib.sh"
root=$DLK_TESTS/..
P=$T/prefix
ok "make install into a prefix" env -u MAKEFLAGS -u MAKELEVEL make -s -C "$root" install PREFIX=/usr DESTDIR="$P" BUILD="$DLK_BUILD" SAN="${SAN:-}"
check "binary, library, header, pc and man pages installed" test -x "$P/usr/bin/dlk" -a -f "$P/usr/lib/libdlk.a" -a -f "$P/usr/include/dlk.h" -a -f "$P/usr/lib/pkgconfig/dlk.pc" -a -f "$P/usr/share/man/man1/dlk.1"
check "the shared library installed with its soname links" sh -c \
    'test -f "$1"/libdlk.so.1.* && test "$(readlink "$1/libdlk.so")" = libdlk.so.1 &&
     readelf -d "$1/libdlk.so.1" | grep -q "SONAME.*\[libdlk.so.1\]"' sh "$P/usr/lib"
export PKG_CONFIG_PATH=$P/usr/lib/pkgconfig
flags=$(PKG_CONFIG_SYSROOT_DIR=$P pkg-config --cflags --libs dlk)
# under the sanitizers the installed library is the sanitized build
sanflags=
[ -n "${SAN:-}" ] && sanflags="-fsanitize=address,undefined"
ok "examples/stream.c builds with pkg-config" sh -c "cc -O2 $sanflags '$root/examples/stream.c' $flags -o '$T/stream'"
python3 "$root/examples/sample_data.py" "$T/src" --samples 100 --size 16 >/dev/null
"$DLK" create "$T/ds" --tensor images:u8:16x16x3 --tensor labels:i32 --tensor 'boxes:f32:?x4' --chunk-size 4K >/dev/null
"$DLK" ingest "$T/ds" from-dir "$T/src" --quiet
check "pkg-config links the example to libdlk.so" sh -c "readelf -d '$T/stream' | grep -q 'NEEDED.*libdlk.so.1'"
ok "the example streams a dataset on the cpu" env LD_LIBRARY_PATH="$P/usr/lib" "$T/stream" "$T/ds" cpu
check "two epochs of 100 samples, equal checksums" sh -c "grep -q 'epoch 1: 128 samples' '$OUT' && grep -q '(equal)' '$OUT'"
# a dataset with a commit: the example reads main's chunks the same way
"$DLK" commit "$T/ds" -m "first" >/dev/null
for i in 1 2 3 4 5; do
    ok "the example streams a dataset with a commit (run $i)" env LD_LIBRARY_PATH="$P/usr/lib" "$T/stream" "$T/ds" cpu
    check "run $i: two epochs of 100 samples, equal checksums" sh -c "grep -q 'epoch 0: 128 samples' '$OUT' && grep -q 'epoch 1: 128 samples' '$OUT' && grep -q '(equal)' '$OUT'"
done
ok "demo script runs" env DLK="$DLK" "$root/examples/demo.sh" "$T/demo"
check "demo ends with a bench-stream report" grep -q "samples/s" "$OUT"

#!/usr/bin/env bash
# Every flag that takes a byte size reads it the same way (one parser):
# 16MiB, 16M and 16MB are 16 MiB; a malformed size is a usage error
# (exit 2) naming the flag's value.
. "$DLK_TESTS/lib.sh"
DS=$T/ds
mkdir -p "$T/src"
python3 - "$T/src" <<'PY'
import struct, sys
# 40 .npy rows of one u8 [4] tensor: enough to stream
for i in range(40):
    hdr = "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }"
    hdr += " " * (63 - len(hdr)) + "\n"
    with open(f"{sys.argv[1]}/{i:03d}_a.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + bytes([i] * 4))
PY
for v in 16MiB 16M 16MB 16mib; do
    ok "create --chunk-size $v" dlk create "$T/c-$v" --tensor a:u8:4 --chunk-size "$v" --json
    ok "ls $v" dlk ls "$T/c-$v" --json
    check "create --chunk-size $v: 16 MiB chunks" grep -q '"chunk_bytes": 16777216' "$OUT"
done
fails "create --chunk-size 16MiBx" 2 dlk create "$T/bad" --tensor a:u8:4 --chunk-size 16MiBx
check "the message names the value" grep -q "16MiBx" "$ERR"
ok "create --chunk-size 4KiB" dlk create "$DS" --tensor a:u8:4 --chunk-size 4KiB
ok "ingest the rows" dlk ingest "$DS" from-dir "$T/src" --quiet
ok "compact --target-size 1MiB" dlk compact "$DS" --target-size 1MiB --json
fails "compact --target-size 1MiBx" 2 dlk compact "$DS" --target-size 1MiBx
for v in 16MiB 16M; do
    ok "bench-stream --memory $v" dlk bench-stream "$DS" --device cpu --memory "$v" --json
done
fails "bench-stream --memory 16MiBx" 2 dlk bench-stream "$DS" --device cpu --memory 16MiBx
fails "bench-stream --pin-cache 1MiBx" 2 dlk bench-stream "$DS" --device cpu --pin-cache 1MiBx

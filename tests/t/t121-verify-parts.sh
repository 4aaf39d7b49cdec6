#!/usr/bin/env bash
# Part tables (formats/dlk-v1.md 3.2, 4.4.9): a new dataset's codec-none
# tensors get part_bytes in the manifest and chunks with a part table laid
# out as the spec says (read here from the bytes, not through dlk);
# verify --deep passes, and one damaged payload byte is reported with the
# number of its part.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "parts" "numpy missing: python3 -m pip install numpy"; exit 0; }

SRC=$T/src
mkdir -p "$SRC"
# 60 images of 150x150x3 (3.9 MiB: four parts of the default 1 MiB in one
# 8 MiB chunk; each over 64 KiB, so that the writer takes them whole and
# hashes the parts across the samples' own buffers), their labels, and
# variable-shape boxes compressed
python3 - "$SRC" <<'PY'
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(7)
np.save(d + "/0000.images.npy", rng.integers(0, 255, (60, 150, 150, 3), dtype="u1"))
np.save(d + "/0000.labels.npy", np.arange(60, dtype="<i4"))
for i in range(20):
    np.save(d + "/%04d.boxes.npy" % i, rng.random((i % 4 + 1, 4)).astype("<f4"))
PY
DS=$(ds_url ds)
ok "create" dlk create "$DS" --tensor images:u8:150x150x3 --tensor labels:i32 \
    --tensor "boxes:f32:?x4:zstd" --chunk-size 8M
ok "ingest" dlk ingest "$DS" from-dir "$SRC" --quiet
obj_get "$DS" staging/manifest.json "$T/m.json"
check "the manifest gives codec-none tensors part_bytes 1048576, zstd none" \
    python3 -c '
import json, sys
m = {t["name"]: t for t in json.load(open(sys.argv[1]))["tensors"]}
assert m["images"]["part_bytes"] == 1048576, m["images"]
assert m["labels"]["part_bytes"] == 1048576, m["labels"]
assert "part_bytes" not in m["boxes"], m["boxes"]' "$T/m.json"

KEY=$(first_chunk_key "$DS" images)
obj_get "$DS" "$KEY" "$T/chunk"
# The layout of formats/dlk-v1.md 3.1-3.2, decoded independently: prints
# nparts and the object offset and length of part 1.
layout() {
    python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:4] == b"DLKC"
dtype, codec, ndim, flags = b[6], b[7], b[8], b[9]
samples, = struct.unpack_from("<I", b, 12)
index_bytes, stored, raw = struct.unpack_from("<QQQ", b, 16)
assert flags == 0x02 and codec == 0, (flags, codec)      # PARTS, fixed shape
layout = 4 * ndim
at = 64 + (layout + 7) // 8 * 8
part_bytes, nparts = struct.unpack_from("<II", b, at)
assert part_bytes == 1048576
assert nparts == min(samples, max(1, -(-raw // part_bytes))), nparts
assert index_bytes == -(-((at - 64) + 8 + 8 * nparts) // 64) * 64, index_bytes
assert all(x == 0 for x in b[64 + layout:at])
assert all(x == 0 for x in b[at + 8 + 8 * nparts:64 + index_bytes])
assert len(b) == 64 + index_bytes + stored and stored == raw
dims = struct.unpack_from("<%dI" % ndim, b, 64)
size = 1
for d in dims:
    size *= d
first = lambda p: p * samples // nparts
print(nparts, 64 + index_bytes + first(1) * size, (first(2) - first(1)) * size)
PY
}
ok "the chunk's part table is laid out as the spec says" layout "$T/chunk"
read -r NPARTS OFF LEN < "$OUT"
check "the chunk of 3.9 MiB has 4 parts" test "$NPARTS" = 4

ok "verify --deep passes" dlk verify "$DS" --deep
check "verify --deep says ok" grep -q "^ok: " "$OUT"

flip_byte "$T/chunk" $((OFF + LEN / 2))
obj_put "$DS" "$KEY" "$T/chunk"
fails "verify --deep finds a damaged byte in part 1" 1 dlk verify "$DS" --deep
check "the chunk and part 1 are named" \
    grep -q "$KEY.*part 1 of 4" "$OUT" "$ERR"
fails "verify --deep --json too" 1 dlk verify "$DS" --deep --json
check "json names the object and the part" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert not d["ok"] and any(e["object"] == sys.argv[2] and "part 1 of 4" in e["error"]
                           for e in d["errors"]), d' "$OUT" "$KEY"
fails "verify without --deep still finds it (the chunk's name)" 1 dlk verify "$DS"
check "named" grep -q "$KEY" "$OUT" "$ERR"
fails "reading a sample of the damaged part fails cleanly" 3 \
    dlk cat "$DS" images 20

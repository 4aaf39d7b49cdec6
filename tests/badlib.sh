# tests/badlib.sh - a dataset with one damaged part, for the tests of the
# loader's on_bad (t460, t520).
#
#   . "$DLK_TESTS/badlib.sh"
#   bad_dataset ROWS SEED  $T/clean and $T/ds: ROWS rows of images
#                          (u8 16x16x3, random) and labels (i32, the
#                          row's number in the source: distinct), in
#                          chunks of 64 KiB (85 images) of 8 parts, read
#                          in spans of four; in $T/ds one byte inside
#                          part 1 of the second images chunk flipped.
#                          Sets KEY (that chunk's key), SAMPLES and
#                          NPARTS (its samples and parts) and PART_ROWS
#                          (the rows of part 1).

bad_dataset() {
    python3 - "$T/src" "$1" "$2" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(int(sys.argv[3]))
for i in range(int(sys.argv[2])):
    p = os.path.join(sys.argv[1], "%05d" % i)
    np.save(p + ".images.npy", rng.integers(0, 255, (16, 16, 3), dtype=np.uint8))
    np.save(p + ".labels.npy", np.int32(i))
PY
    ok "create" dlk create "$T/ds" --tensor images:u8:16x16x3 \
        --tensor labels:i32 --chunk-size 64K --part-size 8K
    ok "ingest $1 rows" dlk ingest "$T/ds" from-dir "$T/src" -q
    cp -r "$T/ds" "$T/clean"
    # the chunk's layout (formats/dlk-v1.md 3.1-3.2), read from its bytes
    python3 - "$T/ds" > "$T/victim" <<'PY'
import json, struct, sys
d = sys.argv[1]
m = json.load(open(d + "/staging/manifest.json"))
key = [t for t in m["tensors"] if t["name"] == "images"][0]["chunks"][1][0]
b = open(d + "/chunks/images/" + key, "rb").read()
samples, = struct.unpack_from("<I", b, 12)
index_bytes, = struct.unpack_from("<Q", b, 16)
part_bytes, nparts = struct.unpack_from("<II", b, 64 + (4 * b[8] + 7) // 8 * 8)
size = 16 * 16 * 3
pf = lambda p: p * samples // nparts
print(key, samples, nparts, pf(2) - pf(1),
      64 + index_bytes + pf(1) * size + size // 2)
PY
    local off
    read -r KEY SAMPLES NPARTS PART_ROWS off < "$T/victim"
    check "the victim chunk has 8 parts" test "$NPARTS" = 8
    flip_byte "$T/ds/chunks/images/$KEY" "$off"
}

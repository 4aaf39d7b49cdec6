#!/usr/bin/env python3
"""gen_npy_seeds.py DIR - the seed corpus of fuzz_npy: small .npy files of
every dtype dlk reads, several shapes, both byte orders, format versions 1
and 2, and a Fortran-order array (which dlk refuses)."""
import io
import os
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, arr, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, arr, allow_pickle=False)
    else:
        np.lib.format.write_array(buf, arr, version=version, allow_pickle=False)
    with open(os.path.join(out, name + ".npy"), "wb") as f:
        f.write(buf.getvalue())


r = np.arange(24)
for dt in ["u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f2", "f4", "f8"]:
    save("le-" + dt, r.astype("<" + dt).reshape(2, 3, 4))
save("bool", (r % 2 == 0).reshape(4, 6))
save("be-i4", r.astype(">i4").reshape(6, 4))
save("be-f8", r.astype(">f8"))
save("scalar", np.array(7, dtype="<i4"))
save("empty", np.zeros((0, 3), dtype="<f4"))
save("nd9", np.zeros((1,) * 9, dtype="u1"))
save("v2-u1", np.zeros((3, 5), dtype="u1"), version=(2, 0))
save("fortran", np.asfortranarray(r.astype("<i2").reshape(4, 6)))

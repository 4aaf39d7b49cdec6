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

# Hostile files for tests/corrupt/npy/ (a second argument): each must be
# refused with a clean decode error.
if len(sys.argv) > 2:
    bad = sys.argv[2]
    os.makedirs(bad, exist_ok=True)

    def npy(d, data=b"", major=1, hlen=None):
        h = d.encode("latin1")
        pre = 10 if major == 1 else 12
        n = (pre + len(h) + 1 + 63) // 64 * 64 - pre
        h = h + b" " * (n - len(h) - 1) + b"\n"
        size = len(h) if hlen is None else hlen
        if major == 1:
            head = b"\x93NUMPY\x01\x00" + size.to_bytes(2, "little")
        else:
            head = bytes([0x93]) + b"NUMPY" + bytes([major, 0]) + size.to_bytes(4, "little")
        return head + h + data

    def d(descr="<i4", fortran="False", shape="(2,)"):
        return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)

    good = npy(d(), b"\0" * 8)
    cases = {
        "bad-magic": b"\x93NUMPZ" + good[6:],
        "truncated-header": good[:40],
        "magic-only": good[:9],
        "header-len-past-end": npy(d(), b"\0" * 8, hlen=0xFFFF),
        "header-len-2e32": npy(d(), b"\0" * 8, major=2, hlen=0xFFFFFFFF),
        "version-4": good[:6] + b"\x04" + good[7:],
        "nul-in-header": good[:20] + b"\0" + good[21:],
        "data-short": good[:-1],
        "data-long": good + b"\0",
        "fortran": npy(d(fortran="True"), b"\0" * 8),
        "descr-object": npy(d(descr="|O"), b"\0" * 8),
        "descr-complex": npy(d(descr="<c8"), b"\0" * 8),
        "descr-unterminated": npy("{'descr': '<i4, 'fortran_order': False, 'shape': (2,), }", b"\0" * 8),
        "shape-negative": npy(d(shape="(-2,)"), b"\0" * 8),
        "shape-10-dims": npy(d(shape="(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)"), b"\0" * 4),
        "shape-dim-2e32": npy(d(shape="(4294967296,)"), b"\0" * 8),
        "shape-overflow": npy(d(shape="(4294967295, 4294967295, 4294967295)"), b"\0" * 8),
        "shape-u8-overflow": npy(d(descr="<u8", shape="(4294967295, 4294967295)"), b"\0" * 8),
        "shape-not-tuple": npy(d(shape="[2]"), b"\0" * 8),
        "shape-missing": npy("{'descr': '<i4', 'fortran_order': False, }", b"\0" * 8),
    }
    for name, data in cases.items():
        with open(os.path.join(bad, name), "wb") as f:
            f.write(data)

"""dlk.Loader(augment=...) on the cpu device against an independent numpy
reference of torchvision's algorithm (TAP output).

    python3 tests/python/test_augment.py URL

URL: a dataset (t540 makes it) with tensor "images" (u8 ?x?x3, kind
image, row r's pixels np.random.default_rng(r)) and "labels" (i32, the
row).  The reference recomputes each sample's parameters from the hash
documented in lib/loader/augment_params.h, then crops, resizes
(antialiased bilinear: a triangle filter of support max(scale, 1)),
flips, jitters and normalises in float64."""
import math
import sys

import numpy as np

import dlk
import tap
from tap import test

URL = sys.argv[1]
ds = dlk.open(URL)
M64 = (1 << 64) - 1
MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])


class Draws:
    """splitmix64 from seed ^ (epoch+1)*G ^ (row+1)*K."""

    def __init__(self, seed, epoch, row):
        self.s = (seed ^ ((epoch + 1) * 0x9E3779B97F4A7C15 & M64)
                  ^ ((row + 1) * 0xD1B54A32D192ED03 & M64))

    def u(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        return (z >> 11) * 2.0 ** -53


def params(seed, epoch, row, H, W, scale, ratio, hflip, jitter):
    d = Draws(seed, epoch, row)
    area = H * W
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    box = None
    for _ in range(10):
        ta = area * (scale[0] + (scale[1] - scale[0]) * d.u())
        ar = math.exp(lr[0] + (lr[1] - lr[0]) * d.u())
        w = round(math.sqrt(ta * ar))
        h = round(math.sqrt(ta / ar))
        ut, ul = d.u(), d.u()
        if box is None and 0 < w <= W and 0 < h <= H:
            box = (int(ut * (H - h + 1)), int(ul * (W - w + 1)), h, w)
            break
    if box is None:
        r = W / H
        w, h = W, H
        if r < ratio[0]:
            h = round(w / ratio[0])
        elif r > ratio[1]:
            w = round(h * ratio[1])
        box = ((H - h) // 2, (W - w) // 2, h, w)
    flip = hflip and d.u() < 0.5
    f = []
    for j in jitter:
        f.append(max(0, 1 - j) + (1 + j - max(0, 1 - j)) * d.u() if j else 1.0)
    return box, flip, f


def weights(n_in, n_out):
    """The (n_out, n_in) matrix of torchvision's antialiased bilinear."""
    scale = n_in / n_out
    support = max(scale, 1.0)
    inv = 1 / scale if scale >= 1 else 1.0
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        c = scale * (i + 0.5)
        lo, hi = max(int(c - support + 0.5), 0), min(int(c + support + 0.5), n_in)
        x = (np.arange(lo, hi) - c + 0.5) * inv
        w = np.clip(1 - np.abs(x), 0, None)
        m[i, lo:hi] = w / w.sum()
    return m


def reference(img, box, flip, f, oh, ow, normalize, rh=None, rw=None, oy=0, ox=0):
    t, l, h, w = box
    crop = img[t:t + h, l:l + w].astype(np.float64)
    rh, rw = rh or oh, rw or ow
    out = np.einsum("yh,hwc,xw->yxc", weights(h, rh)[oy:oy + oh], crop,
                    weights(w, rw)[ox:ox + ow]) / 255.0
    gray = lambda a: a[..., 0] * 0.299 + a[..., 1] * 0.587 + a[..., 2] * 0.114
    if f[0] != 1:
        out = np.clip(out * f[0], 0, 1)
    if f[1] != 1:
        out = np.clip(f[1] * out + (1 - f[1]) * gray(out).mean(), 0, 1)
    if f[2] != 1:
        out = np.clip(f[2] * out + (1 - f[2]) * gray(out)[..., None], 0, 1)
    if flip:
        out = out[:, ::-1]
    if normalize:
        out = (out - MEAN) / STD
    return out


def stored(row):
    return np.asarray(ds.read("images", row))


def batches(spec, seed=3, epochs=1, **kw):
    ld = dlk.Loader(URL, device="cpu", batch_size=8, shuffle=True, seed=seed,
                    epochs=epochs, augment=spec, tensors=["images", "labels"],
                    **kw)
    # each pass over the loader is one epoch
    return [(np.array(np.from_dlpack(b["images"])), [int(i) for i in b.index],
             b.epoch) for _ in range(epochs) for b in ld]


@test
def _():
    """imagenet-style crops (f32 NCHW) equal the reference within 1e-2"""
    spec = ("crop=24,scale=0.08:1,ratio=0.75:1.3333,flip=h,"
            "normalize=imagenet,dtype=f32,layout=nchw")
    worst = 0.0
    for imgs, rows, ep in batches(spec):
        assert imgs.shape == (len(rows), 3, 24, 24), imgs.shape
        for k, r in enumerate(rows):
            src = stored(r)
            box, flip, f = params(3, ep, r, src.shape[0], src.shape[1],
                                  (0.08, 1), (0.75, 1.3333), True, (0, 0, 0))
            want = reference(src, box, flip, f, 24, 24, True)
            worst = max(worst, np.abs(imgs[k].transpose(1, 2, 0) - want).max())
    assert worst <= 1e-2, worst
    print(f"# worst f32 error {worst:.2e}")


@test
def _():
    """a mix of the dataset with itself, augmented: each sample equals the
    reference for its row, its parameters drawn for row + source << 48"""
    spec = "crop=20,flip=h,normalize=imagenet,dtype=f32,layout=nchw"
    ld = dlk.Loader([(URL, 0.5), (URL, 0.5)], device="cpu", batch_size=8,
                    shuffle=True, seed=4, augment=spec,
                    tensors=["images", "labels"])
    worst, n = 0.0, 0
    for b in ld:
        imgs = np.array(np.from_dlpack(b["images"]))
        assert imgs.shape == (8, 3, 20, 20), imgs.shape
        for k, (src_i, r) in enumerate(zip(b.source.tolist(),
                                           b.index.tolist())):
            img = stored(r)
            box, flip, f = params(4, b.epoch, r + (src_i << 48), img.shape[0],
                                  img.shape[1], (0.08, 1), (3 / 4, 4 / 3),
                                  True, (0, 0, 0))
            want = reference(img, box, flip, f, 20, 20, True)
            worst = max(worst, np.abs(imgs[k].transpose(1, 2, 0) - want).max())
            n += 1
    assert n and worst <= 1e-2, (n, worst)


@test
def _():
    """u8 NHWC with jitter equals the reference within 1"""
    spec = "crop=16x20,flip=h,jitter=0.4:0.4:0.4,dtype=u8,layout=nhwc"
    worst = 0.0
    for imgs, rows, ep in batches(spec, seed=9):
        assert imgs.shape == (len(rows), 16, 20, 3) and imgs.dtype == np.uint8
        for k, r in enumerate(rows):
            src = stored(r)
            box, flip, f = params(9, ep, r, src.shape[0], src.shape[1],
                                  (0.08, 1), (3 / 4, 4 / 3), True,
                                  (0.4, 0.4, 0.4))
            want = np.round(reference(src, box, flip, f, 16, 20, False) * 255)
            worst = max(worst, np.abs(imgs[k].astype(np.float64) - want).max())
    assert worst <= 1, worst


@test
def _():
    """imagenet-eval at a small size: shorter side, center crop (f16)"""
    spec = "crop=12,resize=14,normalize=imagenet,dtype=f16,layout=nhwc"
    worst = 0.0
    for imgs, rows, ep in batches(spec):
        assert imgs.dtype == np.float16
        for k, r in enumerate(rows):
            src = stored(r)
            H, W = src.shape[:2]
            rh, rw = (14, int(14 * W / H)) if H <= W else (int(14 * H / W), 14)
            oy, ox = round((rh - 12) / 2), round((rw - 12) / 2)
            want = reference(src, (0, 0, H, W), False, (1, 1, 1), 12, 12, True,
                             rh, rw, oy, ox)
            worst = max(worst, np.abs(imgs[k].astype(np.float64) - want).max())
    assert worst <= 1e-2, worst


@test
def _():
    """same (seed, epoch): the same pixels; the next epoch other crops"""
    a = batches("imagenet-train,crop=16,dtype=f32", epochs=2)
    b = batches("imagenet-train,crop=16,dtype=f32", epochs=2)
    assert all(np.array_equal(x[0], y[0]) and x[1] == y[1] for x, y in zip(a, b))
    by_row = [{}, {}]
    for imgs, rows, ep in a:
        for k, r in enumerate(rows):
            by_row[ep][r] = imgs[k]
    both = [r for r in by_row[0] if r in by_row[1]]
    assert len(both) >= 20, (sorted(by_row[0]), sorted(by_row[1]))
    same = sum(np.array_equal(by_row[0][r], by_row[1][r]) for r in both)
    assert same < len(both) // 4, same


@test
def _():
    """a resumed epoch gets the same pixels"""
    spec = "imagenet-train,crop=16,dtype=f32"
    ld = dlk.Loader(URL, device="cpu", batch_size=8, seed=4, augment=spec,
                    tensors=["images"])
    it = iter(ld)
    next(it)
    st = ld.state_dict()
    rest = [np.array(np.from_dlpack(b["images"])) for b in it]
    ld2 = dlk.Loader(URL, device="cpu", batch_size=8, seed=4, augment=spec,
                     tensors=["images"], state=st)
    again = [np.array(np.from_dlpack(b["images"])) for b in ld2]
    assert len(rest) == len(again) > 0
    assert all(np.array_equal(x, y) for x, y in zip(rest, again))


@test
def _():
    """a video tensor: one crop for both frames of a clip, each frame as
    the reference"""
    spec = "crop=12,flip=h,dtype=f32,layout=nhwc"
    ld = dlk.Loader(URL, device="cpu", batch_size=8, seed=6, augment=spec,
                    augment_tensor="clip", tensors=["clip", "images"])
    worst, n = 0.0, 0
    for b in ld:
        x = np.array(np.from_dlpack(b["clip"]))
        assert x.shape == (8, 2, 12, 12, 3), x.shape
        for k, r in enumerate(int(i) for i in b.index):
            src = np.asarray(ds.read("clip", r))
            box, flip, f = params(6, b.epoch, r, src.shape[1], src.shape[2],
                                  (0.08, 1), (3 / 4, 4 / 3), True, (0, 0, 0))
            for t in range(2):
                want = reference(src[t], box, flip, f, 12, 12, False)
                worst = max(worst, np.abs(x[k, t] - want).max())
            n += 1
    assert n == 40 and worst <= 1e-2, (n, worst)


@test
def _():
    """a bad spec fails naming the field"""
    for spec, field in (("crop=24,scale=2:3", "scale"), ("crop=8,dtype=f8", "dtype"),
                        ("imagenet-train,layout=chw", "layout")):
        try:
            dlk.Loader(URL, device="cpu", batch_size=8, augment=spec)
        except dlk.Error as e:
            assert field in str(e), str(e)
        else:
            raise AssertionError(f"{spec} accepted")


sys.exit(1 if tap.failed else 0)

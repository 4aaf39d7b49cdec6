"""What the peer benchmarks (tests/bench/peer_*.py) share: their command
line, and the timed loop that moves a loader's batches to the device for
repeated epochs until --seconds and reports one JSON line's fields."""
import argparse, time

import torch


def parse_args(description):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("imgdir", help="make_images.py's output (decoded.npy, jpeg/)")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    return ap.parse_args()


def timed_stream(loader, a, images=lambda b: b["x"] if isinstance(b, dict) else b[0]):
    """Samples/s delivered to a.device through `loader`, epoch after epoch;
    first_batch_s is the time to the first batch on the device."""
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    def epochs():
        while True:
            yield from loader

    t0 = time.perf_counter()
    first, n = None, 0
    for b in epochs():
        x = images(b)
        if a.device == "cuda":
            x = x.cuda(non_blocking=True)
        if first is None:
            sync()
            first = time.perf_counter() - t0
        n += x.shape[0]
        if time.perf_counter() - t0 > a.seconds:
            break
    sync()
    dt = time.perf_counter() - t0
    return {"samples": n, "seconds": dt, "samples_per_s": n / dt, "first_batch_s": first}

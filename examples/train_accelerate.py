#!/usr/bin/env python3
"""Train an image classifier on a dlk dataset with Hugging Face
accelerate: prepare() the model and optimizer, stream batches from dlk,
gather metrics across ranks, and resume mid-epoch from a saved state.

    make demo                                   # builds a small dataset
    accelerate launch examples/train_accelerate.py DATASET      # or
    torchrun --nproc-per-node 2 examples/train_accelerate.py DATASET
    ... --resume ckpt/                          # continue mid-epoch

What dlk.torch does for accelerate (python/README.md):
  - the loader reads the launcher's rank and world size itself (each
    rank its own share, equal batch counts), so it is not passed to
    prepare(): prepare() would wrap it in a sampler it does not need;
    batches already sit on this rank's GPU;
  - gather_for_metrics takes tensors made from the batch ("dlk_pad" says
    which samples repeat to even out the ranks: leave them out);
  - to resume mid-epoch, the loader's state_dict() is saved beside
    accelerate's own state and given back with load_state_dict()
    (accelerator.skip_first_batches(loader, n) works too, reading
    nothing for the n batches skipped).
A list of sources, [(URL, weight), ...], mixes datasets the same way.
"""
import argparse
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator

import dlk.torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--save", default="ckpt", help="where to save the state")
    ap.add_argument("--save-every", type=int, default=0,
                    help="save every N steps (0: at each epoch's end)")
    ap.add_argument("--resume", help="a state saved by --save")
    a = ap.parse_args()

    acc = Accelerator(mixed_precision="bf16" if torch.cuda.is_available()
                      else "no")
    loader = dlk.torch.loader(a.dataset, batch_size=a.batch_size,
                              shuffle=True, seed=0,
                              device=str(acc.device))
    info = {t["name"]: t for t in dlk.open(a.dataset).tensors}
    classes = len(info["labels"]["classes"]) or 1000
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    model, opt = acc.prepare(model, opt)

    first = 0
    if a.resume:
        acc.load_state(a.resume)
        with open(os.path.join(a.resume, f"dlk-{acc.process_index}.json")) as f:
            saved = json.load(f)
        loader.load_state_dict(saved["loader"])
        first = saved["epoch"]

    def save(epoch):
        acc.save_state(a.save)
        # each rank its own loader state (its place in its share)
        with open(os.path.join(a.save, f"dlk-{acc.process_index}.json"),
                  "w") as f:
            json.dump({"epoch": epoch, "loader": loader.state_dict()}, f)

    for epoch in range(first, a.epochs):
        model.train()
        right = seen = 0
        for step, batch in enumerate(loader):
            x = batch["images"].permute(0, 3, 1, 2).float().div_(255)
            y = batch["labels"].long().reshape(-1)
            keep = ~batch["dlk_pad"].to(y.device)
            logits = model(x)
            loss = F.cross_entropy(logits[keep], y[keep])
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            # every rank's predictions, padding left out
            hit, pad = acc.gather_for_metrics(
                ((logits.argmax(1) == y), batch["dlk_pad"].to(y.device)))
            right += int(hit[~pad].sum())
            seen += int((~pad).sum())
            if a.save_every and (step + 1) % a.save_every == 0:
                save(epoch)
        if acc.is_main_process:
            print(f"epoch {epoch}: {seen} samples over all ranks, "
                  f"train accuracy {right / max(1, seen):.3f}")
        save(epoch + 1)


if __name__ == "__main__":
    main()

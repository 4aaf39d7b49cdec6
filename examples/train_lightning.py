#!/usr/bin/env python3
"""Train an image classifier on a dlk dataset with PyTorch Lightning:
the dlk loader is the train and validation dataloader, batches land on
the GPU straight from dlk, and a checkpoint resumes mid-epoch.

    make demo                                   # builds a small dataset
    python3 examples/train_lightning.py DATASET                   # 1 GPU
    python3 examples/train_lightning.py DATASET --devices 2       # DDP
    python3 examples/train_lightning.py DATASET --resume last.ckpt

What dlk.torch does for Lightning (python/README.md):
  - Lightning's DDP launcher starts the ranks; each loader follows
    torch.distributed's rank and world size once the process group is up
    (a loader made before the Trainer moves to its rank), so every rank
    reads its own share, with equal batch counts (no sampler to set);
  - with strategy="ddp_spawn" the loader pickles as its options and
    state and opens again in each spawned process;
  - the loader's state_dict() is saved in the checkpoint (the hook
    below), and a fit resumed from it continues mid-epoch, at any world
    size;
  - batches are dicts of tensors: batch["images"] (u8 NHWC on the GPU),
    batch["labels"], and "dlk_pad", True where a sample repeats to even
    out the ranks (mask it out of the loss; it is rare).
A list of sources, [(URL, weight), ...], mixes datasets the same way.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

import dlk.torch

try:
    import lightning as L
except ImportError:  # the older package name
    import pytorch_lightning as L


class Classifier(L.LightningModule):
    def __init__(self, classes, train, lr):
        super().__init__()
        self.lr = lr
        self.train_loader = train
        self.net = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))

    def forward(self, images):
        # u8 NHWC as stored -> float NCHW in [0, 1], on the GPU
        x = images.permute(0, 3, 1, 2).float().div_(255)
        return self.net(x)

    def step(self, batch):
        keep = ~batch["dlk_pad"].to(self.device)
        logits = self(batch["images"])[keep]
        labels = batch["labels"].long().reshape(-1)[keep]
        return F.cross_entropy(logits, labels), (logits.argmax(1) == labels)

    def training_step(self, batch, i):
        loss, _ = self.step(batch)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, i):
        loss, right = self.step(batch)
        self.log("val_acc", right.float().mean(), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)

    # the loader's place in its epoch travels with the checkpoint
    def on_save_checkpoint(self, ckpt):
        ckpt["dlk_train"] = self.train_loader.state_dict()

    def on_load_checkpoint(self, ckpt):
        if "dlk_train" in ckpt:
            self.train_loader.load_state_dict(ckpt["dlk_train"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--val", help="a validation dataset (default: the "
                    "training one, unshuffled)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--strategy", default="auto",
                    help="auto, ddp or ddp_spawn")
    ap.add_argument("--resume", help="a checkpoint to continue from")
    a = ap.parse_args()

    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    # made before the Trainer: each moves to its rank when DDP is up
    train = dlk.torch.loader(a.dataset, batch_size=a.batch_size,
                             shuffle=True, seed=0, device=device)
    val = dlk.torch.loader(a.val or a.dataset, batch_size=a.batch_size,
                           shuffle=False, device=device)
    info = {t["name"]: t for t in dlk.open(a.dataset).tensors}
    classes = len(info["labels"]["classes"]) or 1000
    model = Classifier(classes, train, a.lr)
    trainer = L.Trainer(max_epochs=a.epochs, accelerator="gpu" if gpu else
                        "cpu", devices=a.devices, strategy=a.strategy,
                        precision="bf16-mixed" if gpu else "32-true",
                        logger=False, enable_progress_bar=False)
    trainer.fit(model, train_dataloaders=train, val_dataloaders=val,
                ckpt_path=a.resume)
    if trainer.is_global_zero:
        print("trained %d epochs of %d batches a rank; val_acc %.3f" % (
            trainer.current_epoch, len(train),
            float(trainer.callback_metrics.get("val_acc", float("nan")))))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""dlk.torch under the real Lightning and accelerate, two processes (TAP).

    PYTHONPATH=SITE python3 tests/gpu/frameworks.py DATASET_DIR

SITE holds the dlk package (python/README.md, "Testing"); torch,
lightning and accelerate must be importable.  DATASET_DIR is any dlk
dataset with a tensor of a fixed shape (the model reads the first).  On
GPUs (two or more) Lightning and accelerate run on cuda, else on the cpu
(gloo); the loaders stream into host memory either way, and the
frameworks move the batches.  It runs:

  - Lightning fit + validate, strategy="ddp" (its own launcher: WORLD_SIZE,
    NODE_RANK, LOCAL_RANK, no RANK; the loaders made before the Trainer)
    and "ddp_spawn" (the loaders pickled to the spawned processes),
    devices=2, max_epochs=2: every sample each rank trained and
    validated on counted from the batch's "dlk_index"/"dlk_pad" keys,
    after Lightning's batch transfer; each row exactly once an epoch,
    every epoch and validation run whole;
    Then trainer.test: each row once;
  - Lightning resuming (ddp): a job checkpointing every K steps
    (ModelCheckpoint), and a restarted one from the checkpoint in the
    middle of epoch 1, its loaders made anew: epoch 1's rows before the
    checkpoint and after the restart each exactly once;
  - accelerate over torchrun, 2 processes, and in one: prepare() of the
    loader, the loader's skip_first_batches and accelerate's own (the
    DataLoader it builds), gather_for_metrics of the row ids and the
    padding mask: exactly N rows an epoch.

Each check prints `ok - NAME` or `not ok - NAME`; the exit status is the
number of failures (0: all passed), after a closing line "P passed, F
failed".  The scratch files go to a temporary
folder (DLK_FW_OUT to choose it)."""
import glob
import json
import os
import subprocess
import sys
import tempfile

import torch

import dlk
import dlk.torch

DS = sys.argv[1]
ROLE = sys.argv[2] if len(sys.argv) > 2 else "main"
B = 8
CUDA = torch.cuda.device_count() >= 2
if "DLK_FW_OUT" not in os.environ:          # children inherit it
    os.environ["DLK_FW_OUT"] = tempfile.mkdtemp(prefix="dlk-fw-")
OUT = os.environ["DLK_FW_OUT"]
_ds = dlk.open(DS)
N = len(_ds)
TENSOR, SHAPE = next((t["name"], t["shape"]) for t in _ds.tensors
                     if None not in t["shape"] and t["dtype"] != "bf16")
DIM = 1
for d in SHAPE:
    DIM *= d
failed = passed = 0


def check(name, ok, why=""):
    global failed, passed
    failed += not ok
    passed += bool(ok)
    print(f"{'ok' if ok else 'not ok'} - {name}" +
          ("" if ok else f"\n#   {why}"), flush=True)


def rows(batch):
    idx, pad = batch["dlk_index"], batch["dlk_pad"]
    return idx[~pad.bool()].tolist()


def make_loader(seed, shuffle=True):
    return dlk.torch.loader(DS, batch_size=B, device="cpu", seed=seed,
                            shuffle=shuffle, tensors=[TENSOR])


try:
    import lightning as L
except ImportError:
    L = None

if L is not None:
    class Model(L.LightningModule):
        """Records the rows of every batch it trains and validates on,
        from the batch's keys after Lightning's batch transfer."""

        def __init__(self, strategy):
            super().__init__()
            self.lin = torch.nn.Linear(DIM, 1)
            self.strategy_name = strategy
            self.seen = {"train": [], "val": [], "test": [], "steps": []}

        def forward(self, batch):
            x = batch[TENSOR]
            return self.lin(x.reshape(x.shape[0], -1).float())

        def training_step(self, batch, i):
            self.seen["train"].append([self.current_epoch, rows(batch)])
            return self(batch).mean()

        def validation_step(self, batch, i):
            if not self.trainer.sanity_checking:
                self.seen["val"].append([self.current_epoch, rows(batch)])

        def test_step(self, batch, i):
            self.seen["test"].append([0, rows(batch)])

        def on_train_batch_start(self, batch, i):
            self.seen["steps"].append([self.current_epoch, self.global_step,
                                       rows(batch)])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def on_fit_end(self):
            self._save("", self.seen)

        def on_test_end(self):
            # a file of its own: under ddp_spawn the model tested is the
            # parent's, which saw none of the children's training
            self._save("test-", {"test": self.seen["test"]})

        def _save(self, what, seen):
            with open(f"{OUT}/{self.strategy_name}-{what}"
                      f"{self.global_rank}.json", "w") as f:
                json.dump(seen, f)


def lightning(strategy):
    # made before the Trainer, as a script does
    train, val = make_loader(1), make_loader(0, shuffle=False)
    trainer = L.Trainer(accelerator="gpu" if CUDA else "cpu", devices=2,
                        strategy=strategy, max_epochs=2, logger=False,
                        enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    model = Model(strategy)
    trainer.fit(model, train_dataloaders=train, val_dataloaders=val)
    trainer.test(model, dataloaders=make_loader(0, shuffle=False))
    if strategy == "ddp":
        trainer.strategy.barrier()
        if trainer.global_rank != 0:
            sys.exit(0)                   # rank 0 reports
    parts = [json.load(open(p))
             for p in sorted(glob.glob(f"{OUT}/{strategy}-[0-9]*.json"))]
    tests = [json.load(open(p))
             for p in sorted(glob.glob(f"{OUT}/{strategy}-test-*.json"))]
    check(f"lightning {strategy}: two ranks reported", len(parts) == 2,
          len(parts))
    for kind in ("train", "val"):
        for epoch in range(2):
            got = sorted(r for p in parts for e, rs in p[kind] if e == epoch
                         for r in rs)
            check(f"lightning {strategy}: {kind} epoch {epoch} has each of "
                  f"{N} rows exactly once", got == list(range(N)),
                  f"{len(got)} rows, {len(set(got))} distinct")
    got = sorted(r for p in tests for _, rs in p["test"] for r in rs)
    check(f"lightning {strategy}: trainer.test has each of {N} rows "
          "exactly once", got == list(range(N)),
          f"{len(got)} rows, {len(set(got))} distinct")


def per_rank_batches():
    return len(dlk.torch.loader(DS, batch_size=B, device="cpu", rank=0,
                                world_size=2, tensors=[TENSOR]))


def lightning_resume(part):
    """A job that checkpoints every K steps (ModelCheckpoint) and one that
    restarts from the checkpoint in the middle of epoch 1, with loaders
    made anew as a restarted script makes them (ddp, two processes)."""
    spe = per_rank_batches()
    k = spe + spe // 2
    ck = f"{OUT}/ckpt"
    train, val = make_loader(1), make_loader(0, shuffle=False)
    kw = dict(accelerator="gpu" if CUDA else "cpu", devices=2,
              strategy="ddp", max_epochs=2, logger=False,
              enable_progress_bar=False, enable_model_summary=False)
    model = Model(f"resume{part}")
    if part == 1:
        from lightning.pytorch.callbacks import ModelCheckpoint
        trainer = L.Trainer(callbacks=[ModelCheckpoint(
            dirpath=ck, every_n_train_steps=k, save_top_k=-1)], **kw)
        trainer.fit(model, train_dataloaders=train, val_dataloaders=val)
    else:
        path = glob.glob(f"{ck}/*step={k}.ckpt")
        trainer = L.Trainer(enable_checkpointing=False, **kw)
        trainer.fit(model, train_dataloaders=train, val_dataloaders=val,
                    ckpt_path=path[0] if path else None)


def lightning_resume_check():
    spe = per_rank_batches()
    k = spe + spe // 2
    runs = [[json.load(open(p)) for p in
             sorted(glob.glob(f"{OUT}/resume{part}-[0-9]*.json"))]
            for part in (1, 2)]
    check("lightning resume: both runs reported from two ranks",
          [len(r) for r in runs] == [2, 2], [len(r) for r in runs])
    if [len(r) for r in runs] != [2, 2]:
        return
    before = [r for p in runs[0] for e, g, rs in p["steps"]
              if e == 1 and g < k for r in rs]
    after = [r for p in runs[1] for e, g, rs in p["steps"]
             if e == 1 for r in rs]
    first = [r for p in runs[1] for e, g, rs in p["steps"] if e == 0]
    steps = sorted({g for p in runs[1] for e, g, rs in p["steps"]})
    check(f"lightning resume: the restarted job begins at step {k}, in "
          "epoch 1", not first and steps[:1] == [k], (len(first), steps[:3]))
    check(f"lightning resume: epoch 1 before the checkpoint and after the "
          f"restart: each of {N} rows exactly once",
          sorted(before + after) == list(range(N)),
          f"{len(before)} + {len(after)} rows, "
          f"{len(set(before + after))} distinct")


def accelerate_run():
    """One process of accelerate (under torchrun, or alone)."""
    from accelerate import Accelerator
    acc = Accelerator(cpu=not CUDA)
    ld = make_loader(2)
    model = torch.nn.Linear(DIM, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt, prepared = acc.prepare(model, opt, ld)
    res = {"same": prepared is ld, "world": ld.world_size}

    def gathered(batches):
        out = []
        for b in batches:
            idx = acc.gather_for_metrics(b["dlk_index"].to(acc.device))
            pad = acc.gather_for_metrics(b["dlk_pad"].to(acc.device))
            out += idx[~pad].tolist()
            res["rows_gathered"] = res.get("rows_gathered", 0) + len(idx)
        return out
    first = gathered(b for _, b in zip(range(2), make_loader(2)))
    res["skipped"] = gathered(prepared.skip_first_batches(2))
    res["first"] = first
    res["epoch"] = gathered(prepared)
    res["rows_two_epochs"] = res["rows_gathered"]
    # accelerate's own skip_first_batches, as its resume recipe calls it:
    # a DataLoader over the loader, k batches into the epoch it starts
    # (the loader stands at an epoch's start after the loop above)
    epoch = ld.state_dict()["dlk"]["epoch"]
    fresh = make_loader(2)
    fresh.set_epoch(epoch)
    res["acc_first"] = gathered(b for _, b in zip(range(2), fresh))
    skipping = acc.skip_first_batches(ld, 2)
    res["acc_len"] = [len(skipping), len(ld)]
    res["acc_epochs"] = []
    out = []
    for b in skipping:
        res["acc_epochs"].append(b.epoch)
        out += gathered([b])
    res["acc_skipped"] = out
    res["acc_epoch"] = epoch
    # the loop after it is the next epoch, whole
    nxt = list(iter(ld))
    res["acc_next_epochs"] = sorted({b.epoch for b in nxt})
    res["acc_next"] = gathered(nxt)
    if acc.is_main_process:
        with open(f"{OUT}/accelerate-{res['world']}.json", "w") as f:
            json.dump(res, f)


def accelerate(nproc):
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
              "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    cmd = [sys.executable, __file__, DS, "accelerate"]
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run",
               f"--nproc_per_node={nproc}", "--master_port=29533"] + cmd[1:]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    check(f"accelerate over {nproc} process(es) ran", p.returncode == 0,
          p.stderr[-2000:].replace("\n", "\n#   "))
    path = f"{OUT}/accelerate-{nproc}.json"
    if not os.path.exists(path):
        return
    r = json.load(open(path))
    check(f"accelerate {nproc}: prepare() returns the loader as it is",
          r["same"])
    check(f"accelerate {nproc}: gather_for_metrics of an epoch, padding "
          f"masked: each of {N} rows exactly once",
          sorted(r["epoch"]) == list(range(N)), len(r["epoch"]))
    check(f"accelerate {nproc}: skip_first_batches(2) then the epoch's "
          "other rows exactly",
          sorted(r["first"] + r["skipped"]) == list(range(N)) and
          not set(r["first"]) & set(r["skipped"]),
          (len(r["first"]), len(r["skipped"])))
    if nproc == 1:
        check("accelerate 1: one rank gathers exactly N rows, no padding "
              "(a short last batch)", r["rows_two_epochs"] ==
              2 * N, r["rows_two_epochs"])
    check(f"accelerate {nproc}: its own skip_first_batches(loader, 2): "
          "len() 2 fewer, then the epoch's other rows exactly",
          r["acc_len"][0] == r["acc_len"][1] - 2 and
          sorted(r["acc_first"] + r["acc_skipped"]) == list(range(N)) and
          not set(r["acc_first"]) & set(r["acc_skipped"]) and
          set(r["acc_epochs"]) == {r["acc_epoch"]},
          (r["acc_len"], len(r["acc_first"]), len(r["acc_skipped"]),
           sorted(set(r["acc_epochs"])), r["acc_epoch"]))
    check(f"accelerate {nproc}: the loop after it is the next epoch whole",
          r["acc_next_epochs"] == [r["acc_epoch"] + 1] and
          sorted(r["acc_next"]) == list(range(N)),
          (r["acc_next_epochs"], len(r["acc_next"])))


def main():
    global failed, passed
    if ROLE == "accelerate":
        accelerate_run()
        sys.exit(0)
    if ROLE in ("ddp", "ddp_spawn"):
        lightning(ROLE)
        sys.exit(failed)
    if ROLE in ("resume1", "resume2"):
        lightning_resume(int(ROLE[-1]))
        sys.exit(0)
    # each Lightning run in a process of its own: one run's process group
    # stays up in the process that ran it
    for strategy in ("ddp", "ddp_spawn"):
        p = subprocess.run([sys.executable, __file__, DS, strategy],
                           capture_output=True, text=True)
        tap = [ln for ln in p.stdout.splitlines()
               if ln.startswith(("ok", "not ok", "#"))]
        print("\n".join(tap), flush=True)
        failed += sum(ln.startswith("not ok") for ln in tap)
        passed += sum(ln.startswith("ok") for ln in tap)
        if p.returncode and not any(ln.startswith("not ok") for ln in tap):
            check(f"lightning {strategy} ran", False,
                  p.stderr[-3000:].replace("\n", "\n#   "))
    for part in ("resume1", "resume2"):
        p = subprocess.run([sys.executable, __file__, DS, part],
                           capture_output=True, text=True)
        if p.returncode:
            check(f"lightning {part} ran", False,
                  p.stderr[-3000:].replace("\n", "\n#   "))
    lightning_resume_check()
    accelerate(2)
    accelerate(1)
    print(f"{passed} passed, {failed} failed")
    sys.exit(failed)


# spawned processes (ddp_spawn) import this file again: only the process
# that was started runs the checks
if __name__ == "__main__":
    main()

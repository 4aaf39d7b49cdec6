#!/usr/bin/env python3
"""kill_staged.py DLK DATASET ARGS... - run `DLK create DATASET ARGS...`
and SIGKILL it as soon as a checkpoint has staged rows and before the
merge (tried up to 20 times); prints "yes" when a run was killed with
rows staged and none merged.  For the resume tests (t225, t226)."""
import glob, json, os, shutil, signal, subprocess, sys, time
dlk, ds, args = sys.argv[1], sys.argv[2], sys.argv[3:]
for attempt in range(20):
    shutil.rmtree(ds, ignore_errors=True)
    p = subprocess.Popen([dlk, "create", ds] + args + ["--quiet"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None:
        try:
            docs = glob.glob(ds + "/staging/ingest/*/shard-0-of-1.json")
            doc = json.load(open(docs[0]))["ingest"] if docs else None
        except (OSError, ValueError):
            doc = None
        if doc and doc["ingested"] > 0 and not doc["complete"]:
            os.kill(p.pid, signal.SIGKILL)
            break
        time.sleep(0.0005)
    p.wait()
    try:
        m = json.load(open(ds + "/staging/manifest.json"))
        docs = glob.glob(ds + "/staging/ingest/*/shard-0-of-1.json")
        if docs and all(t["samples"] == 0 for t in m["tensors"]) and \
                json.load(open(docs[0]))["ingest"]["ingested"] > 0:
            print("yes")
            break
    except (OSError, ValueError):
        pass

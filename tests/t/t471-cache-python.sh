#!/usr/bin/env bash
# t471-cache-python.sh - dlk.Loader(..., cache_dir=, cache_limit=) on an
# s3:// dataset (moto), GETs counted by the server's log: a second epoch
# and a second loader make no chunk GET; DLK_CACHE_DIR is the default
# (cache_dir="" turns it off); a folder that cannot be made gives one
# RuntimeWarning and streams as without it; a bad DLK_CACHE_LIMIT is a
# ValueError naming it.  The binding is built over this build's libdlk.so
# (DLK_LIBDIR), as t500 does under SAN=1.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

py_binding "the chunk cache from Python" || exit 0

s3_start
s3_mkbucket dlk-t471
MOTO_LOG=$(ls "$T"/moto-*.log)
python3 - "$T/src" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(471)
for i in range(400):
    np.save(os.path.join(sys.argv[1], "%05d.images.npy" % i),
            rng.integers(0, 255, size=(16, 16, 3), dtype=np.uint8))
PY
ds=s3://dlk-t471/ds
ok "create" dlk create "$ds" --tensor images:u8:16x16x3 --chunk-size 32K
ok "ingest 400 samples" dlk ingest "$ds" from-dir "$T/src" -q
echo x >"$T/plain"

PYTHONPATH="$T/py" "${run_py[@]}" - "$ds" "$T" "$MOTO_LOG" <<'PY'
import os, sys, warnings
import dlk
url, T, log = sys.argv[1:]
def gets():
    return sum('"GET /dlk-t471/ds/chunks/' in l for l in open(log))
def tap(ok, name):
    print(("ok" if ok else "not ok") + " - python: " + name)
def rows(ld):
    return sorted(int(i) for b in ld for i in b.index)
cache = os.path.join(T, "cache")
g0 = gets()
ld = dlk.Loader(url, device="cpu", batch_size=64, epochs=2, cache_dir=cache)
e1, g1 = rows(ld), gets()
e2, g2 = rows(ld), gets()
st = ld.stats()
tap(e1 == list(range(400)) and e2 == e1, "two epochs give every row once")
tap(g1 > g0 and g2 == g1, "the second epoch made no chunk GET (%d, then %d)"
    % (g1 - g0, g2 - g1))
tap(st["cache_on"] and st["cache_fetched"] == len(os.listdir(
    os.path.join(cache, "objects"))) and st["cache_fetched"] >= g1 - g0 - 1,
    "stats: %d chunks fetched into the cache" % st["cache_fetched"])
tap(st["cache_hits"] > 0 and st["cache_warning"] == "",
    "stats: reads from copies, no warning")
ld.close()
ld = dlk.Loader(url, device="cpu", batch_size=64, epochs=1,
                cache_dir=cache, cache_limit="1G")
tap(rows(ld) == e1 and gets() == g2 and ld.stats()["cache_fetched"] == 0,
    "a second loader reads the copies: no chunk GET")
tap(ld.stats()["cache_limit"] == 1 << 30, "cache_limit='1G'")
ld.close()
os.environ["DLK_CACHE_DIR"] = cache
ld = dlk.Loader(url, device="cpu", batch_size=64, epochs=1)
tap(rows(ld) == e1 and gets() == g2 and ld.stats()["cache_on"],
    "DLK_CACHE_DIR is the default")
ld.close()
ld = dlk.Loader(url, device="cpu", batch_size=64, epochs=1, cache_dir="")
tap(rows(ld) == e1 and not ld.stats()["cache_on"] and gets() > g2,
    "cache_dir='' turns it off")
ld.close()
del os.environ["DLK_CACHE_DIR"]
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    ld = dlk.Loader(url, device="cpu", batch_size=64, epochs=2,
                    cache_dir=os.path.join(T, "plain", "cache"))
    ok = rows(ld) == e1 and rows(ld) == e1
    ld.close()
ws = [x for x in w if issubclass(x.category, RuntimeWarning)]
tap(ok, "a folder that cannot be made: every row, both epochs")
tap(len(ws) == 1 and "cannot make the folder" in str(ws[0].message),
    "and one RuntimeWarning (%s)" % [str(x.message) for x in ws])
os.environ["DLK_CACHE_LIMIT"] = "lots"
try:
    dlk.Loader(url, device="cpu", cache_dir=cache)
    tap(False, "a bad DLK_CACHE_LIMIT is refused")
except ValueError as e:
    tap("DLK_CACHE_LIMIT" in str(e), "a bad DLK_CACHE_LIMIT: %s" % e)
PY
rc=$?
[ $rc = 0 ] || echo "not ok - the Python script exited $rc"

"""TAP output for the Python test scripts: @test runs a function at once,
named by its docstring, and prints `ok - NAME`, or `not ok - NAME` with
the traceback as comments; `tap.failed` counts the failures (a script
adds those it finds otherwise) for its exit status."""
import traceback

failed = 0


def test(fn):
    global failed
    name = " ".join(fn.__doc__.split())
    try:
        fn()
        print(f"ok - {name}", flush=True)
    except Exception:
        failed += 1
        print(f"not ok - {name}", flush=True)
        for line in traceback.format_exc().splitlines():
            print("#   " + line, flush=True)
    return fn

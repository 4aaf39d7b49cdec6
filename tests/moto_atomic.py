#!/usr/bin/env python3
"""moto_atomic.py ARGS... - moto_server (ARGS as its own) whose PUTs are
atomic, as S3's are.  moto (5.2.1) checks If-Match and If-None-Match and
then stores the object without a lock, in a threaded server: two
conditional PUTs made on the same version at the same moment can both
pass the check, both answer 200, and the later store silently replaces
the earlier, which S3 never does.  Racing writers (t149, t345,
tests/bench/writers.sh) would then see heads lose writes that dlk was
told had landed; here one PUT at a time is handled."""
import sys
import threading

from moto.s3.responses import S3Response
from moto.server import main

_lock = threading.Lock()
_put_object = S3Response.put_object


def put_object(self, *args, **kwargs):
    with _lock:
        return _put_object(self, *args, **kwargs)


S3Response.put_object = put_object
main(sys.argv[1:])

#!/usr/bin/env python3
"""faultproxy.py - an HTTP proxy between dlk and an S3 server that breaks
requests on purpose, to test retries.

    faultproxy.py --port 0 --upstream http://127.0.0.1:5000 \\
        --delay-ms 50 --rate-500 0.03 --rate-503 0.03 \\
        --rate-reset 0.02 --rate-truncate 0.02 --seed 1

The client uses the proxy as its endpoint; requests are forwarded with
their headers unchanged (Host included: SigV4 signs it).  Per request, at
the configured rates, the proxy:
  500       answers 500 InternalError (S3 XML body) without forwarding
  503       answers 503 SlowDown (S3 XML body) without forwarding
  reset     forwards, then resets the connection part-way through the
            response body (or, for an answer without a body, before it)
  truncate  forwards, sends fewer body bytes than Content-Length, closes
and delays the first byte of every answer by --delay-ms.  --drop-range
forwards every request without its Range header, as a server that
ignores ranges (the whole object, 200) would be asked.

Slow answers (a straggler, not a failure): --slow-ms N holds the body of
chosen answers back for N ms after their headers (an answer without a
body: before its headers).  Chosen are requests whose path (with query)
matches --slow-path REGEX, or all; of those, the fraction --slow-rate
(default 1 with --slow-path, else 0); with --slow-first-per-path only the
first such request of each path may be slow, so that a second identical
request (a hedge) is fast.  For example
    --slow-rate 0.05 --slow-ms 3000
    --slow-path 'chunks/img/0007' --slow-ms 3000 --slow-first-per-path
Each slowed answer is logged as "fault slow METHOD PATH".

A server that stops sending (a failure, not a straggler): at --stall-rate,
a request is forwarded, its answer's headers and part of its body are sent
(an answer without a body: nothing at all, though the server did the
work), then nothing more for --stall-ms (default 120000) or until the
client gives up, and the connection is closed; --stall-max N injects at
most N stalls (0: no limit).  Logged as "fault stall METHOD PATH".

A hostile or broken server (every matching request, no rate): --hostile
  list-repeat  a listing's page (S3 ListObjectsV2, GCS objects.list) is
               answered as truncated, its next token always the same one;
               the proxy asks the server for the first page in its place
  list-fresh   the same with a new token each page: a listing that never
               ends
  trickle      an object GET's answer, headers included, at --trickle-bps
               bytes a second (default 2)
  claim        an object GET's answer claims --claim-bytes (default
               1 GiB - 1) in its Content-Length, sends the real body and
               closes the connection
  longer       an object GET's body gets --longer-bytes (default 1000)
               more bytes than the object has, its Content-Length too
--hostile-path REGEX picks the requests (path with query; the trickle of a
listing: 'list-type=2' for S3, '/o[?]' for GCS); without it, the listing
modes take listings and the others the GETs that are not listings.
Logged as "fault hostile-MODE METHOD PATH".

For benchmarks, --procs N serves from N processes sharing the listening
socket (one Python process relays about 1 GB/s); only with --delay-ms, as
each process would draw and count faults of its own.

It prints its port on the first line of stdout and one line per injected
fault on stderr ("fault KIND METHOD PATH").  Only the standard library is used;
connections, bodies and time are bounded (see the options).
"""
import argparse
import http.client
import os
import random
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
       "proxy-authorization", "te", "trailer", "transfer-encoding",
       "upgrade", "expect"}
CHUNK = 1 << 20  # relay pieces: Python's cost per piece, not per byte, bounds it


class Faults:
    def __init__(self, args):
        self.rng = random.Random(args.seed)
        self.lock = threading.Lock()
        self.table = [("500", args.rate_500), ("503", args.rate_503),
                      ("reset", args.rate_reset),
                      ("truncate", args.rate_truncate)]
        self.table.append(("stall", args.stall_rate))
        self.stall_left = args.stall_max if args.stall_max > 0 else -1
        self.counts = {k: 0 for k, _ in self.table}
        self.counts["slow"] = 0
        for mode in ("list-repeat", "list-fresh", "trickle", "claim",
                     "longer"):
            self.counts["hostile-" + mode] = 0
        # its own generator: the fault sequence of a seed stays the same
        self.slow_rng = random.Random(args.seed + 7919)
        self.slow_re = re.compile(args.slow_path) if args.slow_path else None
        self.slow_rate = args.slow_rate
        if self.slow_rate is None:
            self.slow_rate = 1.0 if args.slow_path else 0.0
        self.slow_first = args.slow_first_per_path
        self.slow_seen = set()

    def slow(self, path):
        """Whether this request's answer is to be held back."""
        if self.slow_rate <= 0.0:
            return False
        if self.slow_re is not None and not self.slow_re.search(path):
            return False
        with self.lock:
            if self.slow_first:
                if path in self.slow_seen:
                    return False
                if len(self.slow_seen) < 1000000:   # bounded memory
                    self.slow_seen.add(path)
            return self.slow_rng.random() < self.slow_rate

    def pick(self):
        with self.lock:
            r = self.rng.random()
            cut = self.rng.random()
        acc = 0.0
        for kind, rate in self.table:
            acc += rate
            if r < acc:
                if kind == "stall" and not self.take_stall():
                    return None, cut
                return kind, cut
        return None, cut

    def take_stall(self):
        with self.lock:
            if self.stall_left == 0:
                return False
            if self.stall_left > 0:
                self.stall_left -= 1
            return True

    def note(self, kind, method, path):
        with self.lock:
            self.counts[kind] += 1
        sys.stderr.write("fault %s %s %s\n" % (kind, method, path))
        sys.stderr.flush()


LOOP_TOKEN = "dlk-loop"
LOOP_QUERY = re.compile(r"(^|&)(continuation-token|pageToken)=dlk-loop[^&]*")


def is_listing(method, path):
    """A ListObjectsV2 (S3) or objects.list (GCS) request."""
    if method != "GET":
        return False
    u = urllib.parse.urlsplit(path)
    return ("list-type=2" in u.query or
            re.search(r"/storage/v1/b/[^/]+/o$", u.path) is not None)


def loop_page(body, token):
    """A listing page made truncated, with token as its next one."""
    text = body.decode("utf-8", "replace")
    if text.lstrip().startswith("{"):           # GCS: JSON
        import json
        d = json.loads(text)
        d["nextPageToken"] = token
        return json.dumps(d).encode()
    text = re.sub(r"<NextContinuationToken>.*?</NextContinuationToken>", "",
                  text, flags=re.S)
    text = text.replace("<IsTruncated>false</IsTruncated>",
                        "<IsTruncated>true</IsTruncated>")
    text = text.replace("</IsTruncated>", "</IsTruncated><NextContinuation"
                        "Token>%s</NextContinuationToken>" % token, 1)
    return text.encode()


def error_xml(code, message, rid):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
            '<Message>%s</Message><RequestId>%s</RequestId></Error>'
            % (code, message, rid)).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120           # idle keep-alive connections end
    server_version = "faultproxy"

    def setup(self):
        super().setup()
        # headers and body go out in separate writes: no Nagle stalls
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        if self.server.opts.verbose:
            sys.stderr.write("%s\n" % (fmt % args))

    def upstream(self, fresh=False):
        local = self.server.local
        conn = getattr(local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            u = self.server.up
            conn = http.client.HTTPConnection(u.hostname, u.port or 80,
                                              timeout=300)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            local.conn = conn
        return conn

    def drop_upstream(self):
        conn = getattr(self.server.local, "conn", None)
        self.server.local.conn = None
        if conn is not None:
            conn.close()

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
                if len(out) > self.server.opts.max_body:
                    raise ValueError("request body too large")
        n = int(self.headers.get("Content-Length") or 0)
        if n > self.server.opts.max_body:
            raise ValueError("request body too large")
        return self.rfile.read(n) if n else b""

    def canned(self, status, code, message):
        self.server.faults.note(str(status), self.command, self.path)
        body = error_xml(code, message, "FAULTPROXY%08X" % random.getrandbits(32))
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amz-request-id", "FAULTPROXY")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def hard_close(self, reset):
        self.close_connection = True
        try:
            self.wfile.flush()
            if reset:   # RST instead of FIN
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            self.connection.close()
        except OSError:
            pass

    def forward(self, body):
        # --drop-range: as a server that does not serve ranges is asked
        # (it answers 200 with the whole object)
        drop = {"range"} if self.server.opts.drop_range else set()
        headers = [(k, v) for k, v in self.headers.items()
                   if k.lower() not in HOP and k.lower() not in drop]
        for attempt in (0, 1):
            conn = self.upstream(fresh=attempt > 0)
            try:
                conn.putrequest(self.command, self.path, skip_host=True,
                                skip_accept_encoding=True)
                for k, v in headers:
                    conn.putheader(k, v)
                if body and not any(k.lower() == "content-length"
                                    for k, _ in headers):
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body if body else None)
                return conn.getresponse()
            except (OSError, http.client.HTTPException):
                if attempt:
                    raise
        return None

    def handle_any(self):
        opts = self.server.opts
        with self.server.slots:
            try:
                body = self.read_body()
            except (ValueError, OSError):
                self.close_connection = True
                return
            hostile = self.hostile_mode()
            if hostile:
                return self.hostile(hostile, body)
            kind, cut = self.server.faults.pick()
            slow = (kind not in ("500", "503") and opts.slow_ms > 0
                    and self.server.faults.slow(self.path))
            if opts.delay_ms:
                time.sleep(opts.delay_ms / 1000.0)
            if kind == "500":
                return self.canned(500, "InternalError",
                                   "We encountered an internal error. "
                                   "Please try again.")
            if kind == "503":
                return self.canned(503, "SlowDown",
                                   "Please reduce your request rate.")
            try:
                resp = self.forward(body)
            except (OSError, http.client.HTTPException) as e:
                self.send_error(502, "upstream: %s" % e)
                return
            self.relay(resp, kind, cut, slow)

    def hostile_mode(self):
        """The --hostile mode this request gets, or None."""
        mode = self.server.opts.hostile
        if not mode or self.command != "GET":
            return None
        rx = self.server.hostile_re
        if rx is not None:
            return mode if rx.search(self.path) else None
        listing = is_listing(self.command, self.path)
        return mode if listing == mode.startswith("list-") else None

    def hostile(self, mode, body):
        opts = self.server.opts
        self.server.faults.note("hostile-" + mode, self.command, self.path)
        if mode.startswith("list-"):
            # the server is asked for the first page again: it knows no
            # token of ours
            u = urllib.parse.urlsplit(self.path)
            q = LOOP_QUERY.sub("", u.query).lstrip("&")
            self.path = urllib.parse.urlunsplit(("", "", u.path, q, ""))
        try:
            resp = self.forward(body)
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.send_error(502, "upstream: %s" % e)
            return
        hdrs = [(k, v) for k, v in resp.getheaders()
                if k.lower() not in HOP and k.lower() != "content-length"]
        length = len(data)
        if mode.startswith("list-") and resp.status == 200:
            with self.server.faults.lock:
                self.server.pages += 1
                n = self.server.pages
            data = loop_page(data, LOOP_TOKEN if mode == "list-repeat"
                             else "%s-%d" % (LOOP_TOKEN, n))
            length = len(data)
        elif mode == "longer" and resp.status == 200:
            data += b"\0" * opts.longer_bytes
            length = len(data)
        elif mode == "claim" and resp.status == 200:
            length = opts.claim_bytes
        head = ["HTTP/1.1 %d %s\r\n" % (resp.status, resp.reason)]
        head += ["%s: %s\r\n" % kv for kv in hdrs]
        head.append("Content-Length: %d\r\n\r\n" % length)
        raw = "".join(head).encode("latin-1") + data
        try:
            if mode == "trickle":
                gap = 1.0 / opts.trickle_bps
                for i in range(len(raw)):
                    self.wfile.write(raw[i:i + 1])
                    self.wfile.flush()
                    time.sleep(gap)
            else:
                self.wfile.write(raw)
                self.wfile.flush()
        except OSError:
            self.close_connection = True
            return
        if mode == "claim":
            self.hard_close(False)

    def stall(self, sent_headers):
        """Send nothing more for --stall-ms, or until the client is gone,
        then close the connection."""
        self.server.faults.note("stall", self.command, self.path)
        try:
            if sent_headers:
                self.wfile.flush()
        except OSError:
            pass
        end = time.monotonic() + self.server.opts.stall_ms / 1000.0
        sock = self.connection
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            try:
                readable, _, _ = select.select([sock], [], [], min(left, 1.0))
                if readable and not sock.recv(4096, socket.MSG_PEEK):
                    break           # the client closed its end
                if readable:        # a pipelined request: drain it
                    sock.recv(65536)
            except (OSError, ValueError):
                break
        self.drop_upstream()
        return self.hard_close(False)

    def hold(self):
        self.server.faults.note("slow", self.command, self.path)
        time.sleep(self.server.opts.slow_ms / 1000.0)

    def relay(self, resp, kind, cut, slow=False):
        hdrs = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP]
        length = resp.getheader("Content-Length")
        chunked = resp.getheader("Transfer-Encoding", "").lower() == "chunked"
        data = None
        if chunked or (length is None and self.command != "HEAD"
                       and resp.status not in (204, 304)):
            data = resp.read()
            hdrs = [(k, v) for k, v in hdrs if k.lower() != "content-length"]
            hdrs.append(("Content-Length", str(len(data))))
            length = len(data)
        n = int(length or 0) if self.command != "HEAD" else 0
        if kind == "reset" and n == 0:
            # the server did the work; the client never hears of it
            resp.read()
            self.server.faults.note(kind, self.command, self.path)
            return self.hard_close(True)
        if kind == "stall" and n == 0:
            resp.read()     # the server did the work; no answer comes
            return self.stall(False)
        if slow and n == 0:
            self.hold()
        self.send_response_only(resp.status, resp.reason)
        for k, v in hdrs:
            self.send_header(k, v)
        self.end_headers()
        if slow and n > 0:
            try:
                self.wfile.flush()
            except OSError:
                self.close_connection = True
                self.drop_upstream()
                return
            self.hold()
        stop = n
        if kind == "stall" and n > 0:
            stop = int(cut * n)
            try:
                sent = 0
                while sent < stop:
                    piece = (data[sent:min(stop, sent + CHUNK)]
                             if data is not None else
                             resp.read(min(CHUNK, stop - sent)))
                    if not piece:
                        break
                    self.wfile.write(piece)
                    sent += len(piece)
            except OSError:
                pass
            return self.stall(True)
        if kind in ("reset", "truncate") and n > 0:
            stop = int(cut * n)
            self.server.faults.note(kind, self.command, self.path)
        sent = 0
        try:
            while sent < stop:
                if data is not None:
                    piece = data[sent:min(stop, sent + CHUNK)]
                else:
                    piece = resp.read(min(CHUNK, stop - sent))
                if not piece:
                    break
                self.wfile.write(piece)
                sent += len(piece)
        except OSError:
            self.close_connection = True
            self.drop_upstream()
            return
        if stop < n:
            self.drop_upstream()   # unread upstream body: it is done
            return self.hard_close(kind == "reset")
        if data is None:
            resp.read()      # drain (HEAD, 204)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        # a client gone, or a connection we broke on purpose: not news
        if self.opts.verbose:
            super().handle_error(request, client_address)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=0, help="0: any free port")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--upstream", required=True, help="http://HOST:PORT")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--rate-500", type=float, default=0.0)
    p.add_argument("--rate-503", type=float, default=0.0)
    p.add_argument("--rate-reset", type=float, default=0.0)
    p.add_argument("--rate-truncate", type=float, default=0.0)
    p.add_argument("--slow-ms", type=float, default=3000.0,
                   help="hold slow answers' bodies back this long")
    p.add_argument("--slow-rate", type=float, default=None,
                   help="fraction of (matching) requests made slow")
    p.add_argument("--slow-path", default=None, metavar="REGEX",
                   help="only requests whose path matches are made slow")
    p.add_argument("--slow-first-per-path", action="store_true",
                   help="only the first slow candidate of each path")
    p.add_argument("--drop-range", action="store_true",
                   help="forward requests without their Range header")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-conns", type=int, default=256,
                   help="requests served at once")
    p.add_argument("--max-body", type=int, default=1 << 30,
                   help="largest request body accepted")
    p.add_argument("--lifetime", type=float, default=3600.0,
                   help="exit after this many seconds")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--stall-rate", type=float, default=0.0,
                   help="fraction of requests whose answer stops mid-body")
    p.add_argument("--stall-ms", type=float, default=120000.0,
                   help="how long a stalled answer sends nothing")
    p.add_argument("--stall-max", type=int, default=0,
                   help="at most this many stalls (0: no limit)")
    p.add_argument("--hostile", default=None,
                   choices=("list-repeat", "list-fresh", "trickle", "claim",
                            "longer"),
                   help="a hostile server's answer to every matching request")
    p.add_argument("--hostile-path", default=None, metavar="REGEX",
                   help="the requests --hostile takes (path with query)")
    p.add_argument("--trickle-bps", type=float, default=2.0)
    p.add_argument("--claim-bytes", type=int, default=(1 << 30) - 1)
    p.add_argument("--longer-bytes", type=int, default=1000)
    p.add_argument("--procs", type=int, default=1,
                   help="serve from this many processes (delay only)")
    opts = p.parse_args()
    up = urllib.parse.urlsplit(opts.upstream)
    if up.scheme != "http" or not up.hostname:
        p.error("--upstream must be http://HOST:PORT")
    for r in (opts.rate_500, opts.rate_503, opts.rate_reset,
              opts.rate_truncate, opts.stall_rate):
        if not 0.0 <= r <= 1.0:
            p.error("rates are between 0 and 1")
    if opts.slow_rate is not None and not 0.0 <= opts.slow_rate <= 1.0:
        p.error("rates are between 0 and 1")
    if opts.slow_path:
        try:
            re.compile(opts.slow_path)
        except re.error as e:
            p.error("--slow-path: %s" % e)
    if not 1 <= opts.procs <= 64:
        p.error("--procs is 1 to 64")
    if opts.procs > 1 and (opts.rate_500 or opts.rate_503 or opts.rate_reset
                           or opts.rate_truncate or opts.stall_rate
                           or opts.slow_rate or opts.slow_path
                           or opts.hostile):
        # each process would draw and count its own faults
        p.error("--procs above 1 is for --delay-ms only, without faults")

    srv = Server((opts.host, opts.port), Handler)
    srv.opts = opts
    srv.up = up
    srv.local = threading.local()
    srv.faults = Faults(opts)
    srv.hostile_re = re.compile(opts.hostile_path) if opts.hostile_path else None
    srv.pages = 0
    srv.slots = threading.BoundedSemaphore(opts.max_conns)
    def stats(*_):
        sys.stderr.write("faults %s\n" % " ".join(
            "%s=%d" % kv for kv in srv.faults.counts.items()))
        sys.stderr.flush()

    # More processes on one listening socket: one Python process relays
    # about 1 GB/s, less than a benchmark through it reads.
    print(srv.server_address[1], flush=True)
    children = []
    for _ in range(opts.procs - 1):
        pid = os.fork()
        if pid == 0:
            children = []
            try:  # PR_SET_PDEATHSIG: go when the first process goes
                import ctypes
                ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
            except (OSError, AttributeError):
                pass
            break
        children.append(pid)

    def on_term(*_):
        for c in children:
            try:
                os.kill(c, signal.SIGTERM)
            except OSError:
                pass
        stats()
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    timer = threading.Timer(opts.lifetime, srv.shutdown)
    timer.daemon = True
    timer.start()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    stats()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A proxy in front of an S3 server that drops If-Match and If-None-Match
from every request: a store that silently ignores conditional writes, as
some S3-compatible stores do.  Prints its port, then serves until killed.

  nocond_proxy.py UPSTREAM_URL
  nocond_proxy.py --rgw-if-match UPSTREAM_URL

--rgw-if-match: keep the conditions, but answer as Ceph RGW does: an
If-Match with a quoted ETag is refused (412 PreconditionFailed) without
reaching the server, a bare one is passed on (quoted again) and compared
there.  Each refusal is logged to stderr as "quoted If-Match refused".
"""
import http.client
import socketserver
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler

RGW = sys.argv[1] == "--rgw-if-match"
UP = urllib.parse.urlsplit(sys.argv[-1])

REFUSED = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>'
           b'PreconditionFailed</Code><RequestId>rgw-emulated</RequestId>'
           b'</Error>')


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if RGW:
            headers = dict(self.headers.items())
            im = next((k for k in headers if k.lower() == "if-match"), None)
            if im and headers[im].startswith('"'):
                print("quoted If-Match refused", file=sys.stderr, flush=True)
                self.send_response(412, "Precondition Failed")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(REFUSED)))
                self.end_headers()
                self.wfile.write(REFUSED)
                return
            if im and headers[im] != "*":
                headers[im] = '"%s"' % headers[im]
        else:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("if-match", "if-none-match")}
        c = http.client.HTTPConnection(UP.hostname, UP.port, timeout=30)
        c.request(self.command, self.path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        self.send_response(r.status, r.reason)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        c.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


with Server(("127.0.0.1", 0), Handler) as srv:
    print(srv.server_address[1], flush=True)
    srv.serve_forever()

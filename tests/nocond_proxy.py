#!/usr/bin/env python3
"""A proxy in front of an S3 server that drops If-Match and If-None-Match
from every request: a store that silently ignores conditional writes, as
some S3-compatible stores do.  Prints its port, then serves until killed.

  nocond_proxy.py UPSTREAM_URL
"""
import http.client
import socketserver
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler

UP = urllib.parse.urlsplit(sys.argv[1])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
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

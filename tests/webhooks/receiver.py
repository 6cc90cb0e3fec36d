#!/usr/bin/env python3
"""A webhook receiver for test_webhooks, on a loopback port, that behaves as receivers do on
their bad days. It checks each request's X-Rackpilot-Signature itself (Python's hmac, not
rackpilot's code) and appends one JSON line per request to LOG:
{path, event, delivery, sig_ok, body (parsed), mode}.

  receiver.py PORT LOG SECRET [--tls CERT KEY]

How it answers is set by POST /control with a body of one word:
  ok        200
  fail      500 with a long body (the deliverer keeps an excerpt)
  busy      503 with Retry-After: 2
  hang      reads the request, then answers nothing for 30 s (past the deliverer's timeout)
  redirect  302 to /elsewhere (which must never be asked for)
  big       200 with 8 MiB of body (the deliverer stops reading; still delivered)
"""
import hashlib
import hmac
import http.server
import json
import socketserver
import ssl
import sys
import threading
import time

port, log_path, secret = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
mode = {"now": "ok"}
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        # Never asked for by a deliverer that follows no redirect (a followed 302 is a GET).
        with lock, open(log_path, "a") as f:
            f.write(json.dumps({"path": self.path, "method": "GET"}) + "\n")
        return self.answer(404, b"")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        if self.path == "/control":
            mode["now"] = raw.decode().strip()
            return self.answer(200, b"ok")
        want = "sha256=" + hmac.new(secret, raw, hashlib.sha256).hexdigest()
        got = self.headers.get("X-Rackpilot-Signature", "")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        m = mode["now"]
        with lock, open(log_path, "a") as f:
            f.write(json.dumps({"path": self.path, "event": self.headers.get("X-Rackpilot-Event"),
                                "delivery": self.headers.get("X-Rackpilot-Delivery"),
                                "sig_ok": hmac.compare_digest(want, got), "body": body,
                                "mode": m}) + "\n")
        if m == "fail":
            return self.answer(500, b"receiver broke \x01\n" + b"x" * 5000)
        if m == "busy":
            return self.answer(503, b"busy", [("Retry-After", "2")])
        if m == "hang":
            time.sleep(30)
            return
        if m == "redirect":
            return self.answer(302, b"", [("Location", "http://127.0.0.1:%d/elsewhere" % port)])
        if m == "big":
            return self.answer(200, b"y" * (8 << 20))
        return self.answer(200, b"thanks")

    def answer(self, status, body, headers=()):
        try:
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = Server(("127.0.0.1", port), Handler)
if len(sys.argv) > 4 and sys.argv[4] == "--tls":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[5], sys.argv[6])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("ready", flush=True)
srv.serve_forever()

#!/usr/bin/env python3
"""A scripted Docker Hub stand-in for the real-node scenarios: plain HTTP on 127.0.0.1 in
front of a real registry, adding Docker Hub's pull-quota headers.

Docker Hub's quota behaviour is a vendor's and no real registry shows it, so this relay
scripts it (the facts are Docker's: both HEAD and GET answers carry `ratelimit-limit` and
`ratelimit-remaining` as `100;w=21600`; every manifest GET counts as a pull, HEAD does not).
Everything else (manifests, blobs, errors) is the real registry's answer, passed through.

    dockerhub-standin.py LISTEN_PORT UPSTREAM_HOST:PORT QUOTA_FILE LOG_FILE

QUOTA_FILE holds the pulls left (re-read on every request, so a scenario can change it);
each manifest GET takes one off. LOG_FILE gets one line per request:
`METHOD PATH<TAB>User-Agent`. Python's standard library only.
"""
import http.client
import http.server
import sys
import threading

PORT, UPSTREAM, QUOTA_FILE, LOG_FILE = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
LIMIT, WINDOW = 100, 21600
LOCK = threading.Lock()
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


def spend(is_pull):
    """Pulls left after this request (one less for a manifest GET)."""
    with LOCK:
        with open(QUOTA_FILE) as f:
            left = int(f.read().strip() or 0)
        if is_pull and left > 0:
            left -= 1
            with open(QUOTA_FILE, "w") as f:
                f.write(f"{left}\n")
        return left


class Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def relay(self):
        with LOCK, open(LOG_FILE, "a") as log:
            log.write(f"{self.command} {self.path}\t{self.headers.get('User-Agent', '')}\n")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP | {"host"}}
        up = http.client.HTTPConnection(UPSTREAM, timeout=30)
        up.request(self.command, self.path, body=body, headers=headers)
        resp = up.getresponse()
        left = spend(self.command == "GET" and "/manifests/" in self.path)
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("ratelimit-limit", f"{LIMIT};w={WINDOW}")
        self.send_header("ratelimit-remaining", f"{left};w={WINDOW}")
        data = resp.read() if self.command != "HEAD" else b""
        if self.command != "HEAD" and resp.getheader("Content-Length") is None:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)
        up.close()

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = relay


if __name__ == "__main__":
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(PORT)), Relay)
    server.daemon_threads = True
    server.serve_forever()

#!/usr/bin/env python3
"""A scripted stand-in for the Amazon ECR API, for the cluster harness's node: what the real
ecr-credential-provider calls (GetAuthorizationToken, AWS JSON 1.1 over HTTP POST) when the
kubelet's provider config points AWS_ENDPOINT_URL_ECR here. It answers every call with one
token, base64(USER:PASSWORD) valid for 12 hours, and appends one line per call to LOG:
`<unix time> <X-Amz-Target> <SigV4 credential scope>`. Any other target gets a 400.

    ecr-api.py --listen 127.0.0.1:PORT --token-file FILE --log LOG

FILE holds `USER:PASSWORD` (read once at start; never printed). Loopback only.
tests/integration/support/ecr_api.rs is the Rust test suite's stand-in for the same API.
"""
import argparse
import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TARGET = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    if not host.startswith("127."):
        raise SystemExit("ecr-api.py listens on loopback only")
    with open(a.token_file) as f:
        token = base64.b64encode(f.read().strip().encode()).decode()
    lock = threading.Lock()
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            target = self.headers.get("X-Amz-Target", "")
            auth = self.headers.get("Authorization", "")
            scope = auth.split("Credential=", 1)[1].split(",", 1)[0] if "Credential=" in auth else "-"
            with lock:
                served[0] += 1
                rid = f"ecr-api-{served[0]}"
                with open(a.log, "a") as log:
                    log.write(f"{int(time.time())} {target or '-'} {scope}\n")
            if target == TARGET:
                status = 200
                region = scope.split("/")[2] if scope.count("/") >= 3 else "us-east-1"
                body = {"authorizationData": [{
                    "authorizationToken": token,
                    "expiresAt": time.time() + 12 * 3600,
                    "proxyEndpoint": f"https://123456789012.dkr.ecr.{region}.amazonaws.com",
                }]}
            else:
                status = 400
                body = {"__type": "UnknownOperationException", "message": "not scripted"}
            data = json.dumps(body).encode()
            # One write for head and body (see tests/integration/support/ecr_api.rs).
            head = (f"HTTP/1.1 {status} Scripted\r\nContent-Type: application/x-amz-json-1.1\r\n"
                    f"x-amzn-RequestId: {rid}\r\nContent-Length: {len(data)}\r\n\r\n").encode()
            self.wfile.write(head + data)
            self.wfile.flush()

        def log_message(self, *args):
            pass

    ThreadingHTTPServer((host, int(port)), Handler).serve_forever()


if __name__ == "__main__":
    main()

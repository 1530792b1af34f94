#!/usr/bin/env python3
"""Small HTTPS clients for scripts/webhook-load.sh (standard library only).

  probe.py oversized URL CA ROUNDS
      Per round, three requests above the 3 MiB limit, each on its own connection:
        declared  Content-Length 3 MiB + 1 in the headers and no body sent at all: the 413
                  must arrive without the body (proves "refused before the body is read");
        sent      the same header, then the body written while the answer is awaited;
        chunked   no Content-Length, 3.5 MiB chunked: refused while reading.
      Prints `oversized_<variant>_<status> COUNT` lines and `oversized_max_ms`; exits 1 unless
      every answer is 413.

  probe.py drain URL CA BODY N MARK
      Opens N connections, sends BODY (an AdmissionReview) on each, creates the file MARK
      once all are written, then reads every answer. Prints `drain_sent`, `drain_complete`
      (full HTTP responses with status 200 and a JSON AdmissionReview body),
      `drain_failed`, `drain_max_ms` and the verdicts; exits 1 unless all N completed.

  probe.py keepalive URL CA BODY N SECONDS
      N keep-alive connections each POST BODY in a closed loop (the next request as soon
      as the answer is in, like a busy API server) until an answer carries
      `Connection: close` or SECONDS pass. A connection closed while a written request
      awaits its answer is a dropped request. Prints `keepalive_connections`,
      `keepalive_answers`, `keepalive_closed_cleanly`, `keepalive_dropped`; exits 1 if
      any request was dropped or a connection never saw `Connection: close`.

  probe.py refused URL CA
      Exit 0 when a new TLS connection is refused or reset (the listener is closed).
"""

import http.client
import json
import socket
import ssl
import sys
import threading
import time
import urllib.parse

LIMIT = 3 * 1024 * 1024


def connect(url, ca, timeout):
    u = urllib.parse.urlsplit(url)
    ctx = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection((u.hostname, u.port), timeout=timeout)
    return ctx.wrap_socket(raw, server_hostname=u.hostname), u


def read_response(sock):
    resp = http.client.HTTPResponse(sock)
    resp.begin()
    return resp.status, resp.read()


def oversized(url, ca, rounds):
    counts, worst = {}, 0.0
    head = (
        "POST /validate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        "{length}\r\n"
    )
    for _ in range(rounds):
        for variant in ("declared", "sent", "chunked"):
            t0 = time.monotonic()
            s, u = connect(url, ca, 10)
            host = f"{u.hostname}:{u.port}"
            status = "error"
            try:
                if variant == "chunked":
                    s.sendall(head.format(host=host, length="Transfer-Encoding: chunked\r\n").encode())
                    chunk = b"[" * 65536
                    try:
                        for _ in range((LIMIT + LIMIT // 2) // len(chunk)):
                            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                        s.sendall(b"0\r\n\r\n")
                    except OSError:
                        pass  # refused mid-body: the answer is still to be read
                else:
                    s.sendall(head.format(host=host, length=f"Content-Length: {LIMIT + 1}\r\n").encode())
                    if variant == "sent":
                        try:
                            s.sendall(b" " * (LIMIT + 1))
                        except OSError:
                            pass
                st, _ = read_response(s)
                status = str(st)
            except (OSError, http.client.HTTPException) as e:
                status = "error-" + type(e).__name__
            finally:
                s.close()
            worst = max(worst, (time.monotonic() - t0) * 1000)
            key = f"oversized_{variant}_{status}"
            counts[key] = counts.get(key, 0) + 1
    for k in sorted(counts):
        print(k, counts[k])
    print("oversized_max_ms", round(worst, 1))
    return 0 if all(k.endswith("_413") for k in counts) else 1


def drain(url, ca, body_file, n, mark):
    body = open(body_file, "rb").read()
    conns = []
    for _ in range(n):
        s, u = connect(url, ca, 60)
        conns.append(s)
    req = (
        f"POST /validate HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    t0 = time.monotonic()
    for s in conns:
        s.sendall(req)
    open(mark, "w").close()
    results = [None] * n
    ends = [0.0] * n

    def reader(i):
        try:
            st, data = read_response(conns[i])
            review = json.loads(data)
            r = review["response"]
            verdict = "allowed" if r["allowed"] else "denied"
            if r.get("warnings") and any("not verified" in w for w in r["warnings"]):
                verdict += "+not-verified"
            results[i] = (st, verdict)
        except Exception as e:  # noqa: BLE001 - any failure is a dropped request
            results[i] = ("dropped", type(e).__name__)
        ends[i] = time.monotonic()

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    complete = sum(1 for r in results if r[0] == 200)
    print("drain_sent", n)
    print("drain_complete", complete)
    print("drain_failed", n - complete)
    print("drain_max_ms", round((max(ends) - t0) * 1000, 1))
    verdicts = {}
    for r in results:
        k = f"{r[0]}:{r[1]}"
        verdicts[k] = verdicts.get(k, 0) + 1
    for k in sorted(verdicts):
        print("drain_answer", k, verdicts[k])
    return 0 if complete == n else 1


def keepalive(url, ca, body_file, n, seconds):
    body = open(body_file, "rb").read()
    answers = [0] * n
    outcome = ["running"] * n
    deadline = time.monotonic() + seconds

    def client(i):
        try:
            s, u = connect(url, ca, 30)
        except OSError as e:
            outcome[i] = "connect-" + type(e).__name__
            return
        req = (
            f"POST /validate HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        while time.monotonic() < deadline:
            try:
                s.sendall(req)
                resp = http.client.HTTPResponse(s)
                resp.begin()
                resp.read()
            except (OSError, http.client.HTTPException) as e:
                outcome[i] = "dropped-" + type(e).__name__
                return
            answers[i] += 1
            if (resp.getheader("connection") or "").lower() == "close":
                outcome[i] = "closed-cleanly"
                return
        outcome[i] = "never-closed"

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("keepalive_connections", n)
    print("keepalive_answers", sum(answers))
    print("keepalive_closed_cleanly", outcome.count("closed-cleanly"))
    print("keepalive_dropped", sum(1 for o in outcome if o.startswith("dropped")))
    others = [o for o in outcome if o != "closed-cleanly" and not o.startswith("dropped")]
    if others:
        print("keepalive_other", " ".join(sorted(set(others))))
    return 0 if outcome.count("closed-cleanly") == n else 1


def refused(url, ca):
    try:
        s, _ = connect(url, ca, 3)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        read_response(s)
    except (OSError, http.client.HTTPException):
        return 0
    return 1


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "oversized":
        sys.exit(oversized(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    if cmd == "drain":
        sys.exit(drain(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]))
    if cmd == "keepalive":
        sys.exit(keepalive(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])))
    if cmd == "refused":
        sys.exit(refused(sys.argv[2], sys.argv[3]))
    sys.exit(__doc__)

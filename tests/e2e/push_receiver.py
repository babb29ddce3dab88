#!/usr/bin/env python3
"""The push tests' own server (t16xx): an HTTP server on 127.0.0.1 that
stores every request it gets, as Pyroscope, Parca or an OpenTelemetry
collector would receive it, for the tests to decode with the real readers.

    push_receiver.py DIR        serve; the port it listens on goes to DIR/port

Each request N is kept as DIR/req-N.json (method, path, query, headers, the
status answered) and DIR/req-N.body (the body as it came); its profile, taken
out of the body as each server takes it, as DIR/req-N.profile: the form's
'profile' part (Pyroscope's /ingest), the base64 rawProfile of the JSON
(Parca's /profiles/writeraw), the body itself (OTLP), gunzipped when its
Content-Encoding is gzip. It answers with the
status in DIR/status (a number; 200 when there is none), and while DIR/hold
exists it holds every answer back (the request is stored first): a push
caught in the middle. Requests answered with another status are stored too
(their json says which).
"""
import base64
import email.parser
import email.policy
import gzip
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]
lock = threading.Lock()
counter = [0]


def status_now():
    try:
        with open(os.path.join(DIR, "status")) as f:
            return int(f.read().strip() or "200")
    except (OSError, ValueError):
        return 200


def profile_of(path, headers, body):
    ctype = headers.get("Content-Type", "")
    if headers.get("Content-Encoding", "") == "gzip":
        body = gzip.decompress(body)
    if ctype.startswith("multipart/form-data"):
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        for part in msg.iter_parts():
            if part.get_param("name", header="content-disposition") == "profile":
                return part.get_payload(decode=True)
        return None
    if ctype.startswith("application/json"):
        req = json.loads(body)
        return base64.b64decode(req["series"][0]["samples"][0]["rawProfile"])
    return body


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n) if n else b""
        status = status_now()
        with lock:
            counter[0] += 1
            k = counter[0]
        u = urllib.parse.urlsplit(self.path)
        meta = {
            "n": k,
            "method": "POST",
            "path": u.path,
            "query": urllib.parse.parse_qs(u.query),
            "headers": {key: val for key, val in self.headers.items()},
            "status": status,
            "time": time.time(),
        }
        base = os.path.join(DIR, "req-%04d" % k)
        with open(base + ".body", "wb") as f:
            f.write(body)
        try:
            prof = profile_of(u.path, self.headers, body)
        except Exception as e:  # stored as it came: the test says what is wrong
            prof = None
            meta["profile_error"] = str(e)
        if prof is not None:
            with open(base + ".profile", "wb") as f:
                f.write(prof)
        # the json last: a test that sees it sees the whole request
        with open(base + ".json.tmp", "w") as f:
            json.dump(meta, f)
        os.rename(base + ".json.tmp", base + ".json")
        while os.path.exists(os.path.join(DIR, "hold")):
            time.sleep(0.02)
        reply = b"stored\n" if status < 300 else b"the test's receiver answers %d\n" % status
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = os.path.join(DIR, "port.tmp")
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, os.path.join(DIR, "port"))
    srv.serve_forever()


if __name__ == "__main__":
    main()

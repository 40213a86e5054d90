#!/usr/bin/env python3
"""A stand-in for the two GitHub REST endpoints armhived calls, on loopback, for e2e tests.

POST {prefix}/orgs/{org}/actions/runners/generate-jitconfig
     {name, runner_group_id, labels, work_folder} -> 201 {runner: {id, name, ...}, encoded_jit_config}
DELETE {prefix}/orgs/{org}/actions/runners/{id} -> 204
(shapes as docs.github.com "REST API endpoints for self-hosted runners" documents them).
Anything else is 404. Every request (method, path, Authorization header, JSON body) is appended
to RECORD as one JSON line; each JIT configuration handed out is a fresh random string, also
recorded (the test looks for it where it must not be).

usage: github_api_standin.py PORT_FILE RECORD
"""
import http.server
import json
import secrets
import sys
import threading

PORT_FILE, RECORD = sys.argv[1], sys.argv[2]
lock = threading.Lock()
next_id = [100]


def record(entry):
    with lock:
        with open(RECORD, "a") as f:
            f.write(json.dumps(entry) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        parts = self.path.strip("/").split("/")
        ok = (len(parts) == 5 and parts[0] == "orgs" and parts[2:] ==
              ["actions", "runners", "generate-jitconfig"])
        if not ok or not isinstance(body, dict) or "runner_group_id" not in body or \
                not body.get("labels") or not body.get("name"):
            record({"method": "POST", "path": self.path, "body": body, "status": 422})
            return self.reply(422, {"message": "Invalid request."})
        with lock:
            rid = next_id[0]
            next_id[0] += 1
        jit = "jit-" + secrets.token_hex(24)
        record({"method": "POST", "path": self.path, "body": body,
                "authorization": self.headers.get("Authorization"),
                "api_version": self.headers.get("X-GitHub-Api-Version"),
                "status": 201, "runner_id": rid, "encoded_jit_config": jit})
        self.reply(201, {"runner": {"id": rid, "name": body["name"], "os": "unknown",
                                    "status": "offline", "busy": False,
                                    "labels": [{"name": l} for l in body["labels"]]},
                         "encoded_jit_config": jit})

    def do_DELETE(self):
        parts = self.path.strip("/").split("/")
        ok = len(parts) == 5 and parts[0] == "orgs" and parts[2:4] == ["actions", "runners"]
        record({"method": "DELETE", "path": self.path, "status": 204 if ok else 404})
        if not ok:
            return self.reply(404, {"message": "Not Found"})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()

#!/usr/bin/env python3
"""A stand-in for the GitHub REST endpoints armhived calls, on loopback, for tests.

SCOPE is orgs/{org} or repos/{owner}/{repo}:
POST {prefix}/SCOPE/actions/runners/generate-jitconfig
     {name, runner_group_id, labels, work_folder} -> 201 {runner: {id, name, ...}, encoded_jit_config}
DELETE {prefix}/SCOPE/actions/runners/{id} -> 204
GET  {prefix}/SCOPE/actions/runners?per_page=N&page=P
     -> 200 {total_count, runners: [{id, name, os, status, busy, labels: [{id, name, type}]}]}
     (the runners it made and did not delete, nor forget, plus those added by control)
GET  {prefix}/repos/{owner}/{repo}/actions/runs?status=queued&per_page=N
     -> 200 {total_count, workflow_runs: [{id, name, status, ...}]} (the runs of queued jobs)
GET  {prefix}/repos/{owner}/{repo}/actions/runs/{run_id}/jobs?per_page=N&page=P
     -> 200 {total_count, jobs: [{id, run_id, status, labels, runner_id, runner_name, ...}]}
     (whatever the scope the runners are made in: an organisation's runners serve its
     repositories' jobs; a job queued with a "repo" is that repository's only, compared
     without regard to case as GitHub does, one without is every repository's; a repository
     control made missing answers 404 {"message": "Not Found"}, as GitHub answers for one that
     does not exist or that the token cannot see)
(shapes as docs.github.com "REST API endpoints for self-hosted runners", "... for workflow
runs" and "... for workflow jobs" document them), and
POST {prefix}/app/installations/{id}/access_tokens  (Authorization: Bearer <App JWT>)
     -> 201 {token, expires_at, permissions, repository_selection}
("Authenticating as a GitHub App installation"); with APP_PUBLIC_KEY (a PEM file) the JWT's
RS256 signature is checked with openssl(1) and its iat/exp/iss with APP_ID, else 401.

Every reply of those endpoints carries GitHub's rate-limit headers (X-RateLimit-Limit,
-Remaining, -Used, -Reset, -Resource). A window allows 5000 requests (or what control says);
a request past it is 403 {"message": "API rate limit exceeded ..."} with Remaining 0, as
GitHub's primary limit answers.

POST /_control (tests only; not recorded) takes one JSON object of:
  {"forget_runner": ID}                 GitHub no longer lists that runner
  {"add_runners": [NAME, ...]}          runners made elsewhere (offline, idle), listed
  {"queue_job": {"id", "run_id", "labels", "status", "repo"}}   a job (status default
                                        "queued"; repo "OWNER/NAME", default every one)
  {"missing_repo": "OWNER/NAME"}        that repository's runs and jobs answer 404
  {"fail_next": [STATUS, ...], "retry_after": S}        the next requests fail with these
                                        statuses (429: a secondary rate limit, with
                                        Retry-After S when given: seconds or an
                                        HTTP date, sent as written)
  {"date": TEXT}                        every reply's Date header is TEXT from now on (a
                                        GitHub whose clock is not ours)
  {"rate_limit": N}                     a fresh window of N requests, resetting in 60 s
and answers 200 {"runners": [...ids listed], "next_runner_id": ...}.
Anything else is 404. Every request (method, path, Authorization header, JSON body, status)
is appended to RECORD as one JSON line; each JIT configuration handed out is a fresh random
string, also recorded (the test looks for it where it must not be).

usage: github_api_standin.py PORT_FILE RECORD [APP_ID APP_PUBLIC_KEY]
"""
import base64
import datetime
import http.server
import json
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

PORT_FILE, RECORD = sys.argv[1], sys.argv[2]
APP_ID = sys.argv[3] if len(sys.argv) > 4 else None
APP_PUBLIC_KEY = sys.argv[4] if len(sys.argv) > 4 else None


def b64url(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def jwt_ok(authorization):
    """An RS256 App JWT as GitHub checks it: signature, iss, and a lifetime of at most 10 min."""
    if not authorization or not authorization.startswith("Bearer ") or APP_PUBLIC_KEY is None:
        return False
    parts = authorization[7:].split(".")
    if len(parts) != 3:
        return False
    try:
        header, payload = json.loads(b64url(parts[0])), json.loads(b64url(parts[1]))
        signature = b64url(parts[2])
    except ValueError:
        return False
    now = time.time()
    if header.get("alg") != "RS256" or str(payload.get("iss")) != APP_ID or \
            not payload.get("iat", now + 1) <= now or not now < payload.get("exp", 0) or \
            payload["exp"] - payload["iat"] > 600:
        return False
    with tempfile.NamedTemporaryFile() as sig, tempfile.NamedTemporaryFile() as data:
        sig.write(signature)
        sig.flush()
        data.write((parts[0] + "." + parts[1]).encode())
        data.flush()
        return subprocess.run(["openssl", "dgst", "-sha256", "-verify", APP_PUBLIC_KEY,
                               "-signature", sig.name, data.name],
                              capture_output=True).returncode == 0
lock = threading.Lock()
next_id = [100]
runners = {}      # id -> {id, name, labels, busy}: listed by GET .../actions/runners
jobs = {}         # id -> {id, run_id, labels, status, repo (lower case, or None: any)}
missing_repos = set()  # "owner/name" in lower case: 404
fail_next = []    # statuses the next requests fail with
retry_after = [None]
fixed_date = [None]
window = {"limit": 5000, "used": 0, "reset": int(time.time()) + 3600}


def record(entry):
    with lock:
        with open(RECORD, "a") as f:
            f.write(json.dumps(entry) + "\n")


def scope_of(parts):
    """(scope parts, rest) for orgs/ORG/... or repos/OWNER/REPO/..., else (None, None)."""
    if len(parts) >= 2 and parts[0] == "orgs":
        return parts[:2], parts[2:]
    if len(parts) >= 3 and parts[0] == "repos":
        return parts[:3], parts[3:]
    return None, None


def runner_json(r):
    return {"id": r["id"], "name": r["name"], "os": "Linux", "status": "offline",
            "busy": r["busy"],
            "labels": [{"id": i + 1, "name": l, "type": "custom"}
                       for i, l in enumerate(r["labels"])]}


def page_of(items, query):
    per_page = max(1, min(100, int(query.get("per_page", ["30"])[0])))
    page = max(1, int(query.get("page", ["1"])[0]))
    return items[(page - 1) * per_page:page * per_page]


class Handler(http.server.BaseHTTPRequestHandler):
    def date_time_string(self, timestamp=None):
        """The Date header send_response adds: control's, else the real time."""
        with lock:
            date = fixed_date[0]
        return date if date is not None else super().date_time_string(timestamp)

    def reply(self, status, body=None, headers=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        with lock:
            remaining = max(0, window["limit"] - window["used"])
            rate = {"X-RateLimit-Limit": window["limit"], "X-RateLimit-Remaining": remaining,
                    "X-RateLimit-Used": window["used"], "X-RateLimit-Reset": window["reset"],
                    "X-RateLimit-Resource": "core"}
        for k, v in list(rate.items()) + list((headers or {}).items()):
            self.send_header(k, str(v))
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def limited(self, method):
        """Counts the request against the window; answers it when it fails: True."""
        with lock:
            if time.time() >= window["reset"]:
                window["used"], window["reset"] = 0, int(time.time()) + 3600
            window["used"] += 1
            over = window["used"] > window["limit"]
            status = fail_next.pop(0) if fail_next else None
            after = retry_after[0]
        if over:
            record({"method": method, "path": self.path, "status": 403})
            self.reply(403, {"message": "API rate limit exceeded for installation ID 1.",
                             "documentation_url": "https://docs.github.com/rest/overview/"
                                                  "rate-limits-for-the-rest-api"})
            return True
        if status is None:
            return False
        record({"method": method, "path": self.path, "status": status})
        if status == 429:
            self.reply(429, {"message": "You have exceeded a secondary rate limit. Please wait "
                                        "a few minutes before you try again."},
                       {"Retry-After": after} if after is not None else None)
        else:
            self.reply(status, {"message": "Server Error"})
        return True

    def control(self, body):
        with lock:
            if "forget_runner" in body:
                runners.pop(int(body["forget_runner"]), None)
            for name in body.get("add_runners", []):
                rid = next_id[0]
                next_id[0] += 1
                runners[rid] = {"id": rid, "name": name, "labels": ["self-hosted"], "busy": False}
            if "queue_job" in body:
                j = body["queue_job"]
                jobs[int(j["id"])] = {"id": int(j["id"]), "run_id": int(j["run_id"]),
                                      "labels": j.get("labels", []),
                                      "status": j.get("status", "queued"),
                                      "repo": j["repo"].lower() if j.get("repo") else None}
            if "missing_repo" in body:
                missing_repos.add(body["missing_repo"].lower())
            if "fail_next" in body:
                fail_next[:] = list(body["fail_next"])
                retry_after[0] = body.get("retry_after")
            if "date" in body:
                fixed_date[0] = body["date"]
            if "rate_limit" in body:
                window.update(limit=int(body["rate_limit"]), used=0,
                              reset=int(time.time()) + 60)
            out = {"runners": sorted(runners), "next_runner_id": next_id[0]}
        self.reply(200, out)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        scope, rest = scope_of(url.path.strip("/").split("/"))
        if scope is None:
            record({"method": "GET", "path": self.path, "status": 404})
            return self.reply(404, {"message": "Not Found"})
        if self.limited("GET"):
            return None
        if rest == ["actions", "runners"]:
            with lock:
                listed = [runner_json(runners[k]) for k in sorted(runners)]
            record({"method": "GET", "path": self.path, "status": 200,
                    "authorization": self.headers.get("Authorization")})
            return self.reply(200, {"total_count": len(listed),
                                    "runners": page_of(listed, query)})
        repo = "/".join(scope[1:]).lower() if scope[0] == "repos" else None

        def in_repo(j):
            return j["repo"] is None or j["repo"] == repo
        if repo is not None and rest[:2] == ["actions", "runs"]:
            with lock:
                missing = repo in missing_repos
            if missing:
                record({"method": "GET", "path": self.path, "status": 404})
                return self.reply(404, {"message": "Not Found",
                                        "documentation_url": "https://docs.github.com/rest"})
        if scope[0] == "repos" and rest == ["actions", "runs"]:
            wanted = query.get("status", [None])[0]
            with lock:
                run_ids = sorted({j["run_id"] for j in jobs.values()
                                  if in_repo(j) and (wanted is None or j["status"] == wanted)})
            runs = [{"id": r, "name": "CI", "status": wanted or "queued",
                     "conclusion": None, "run_attempt": 1} for r in run_ids]
            record({"method": "GET", "path": self.path, "status": 200})
            return self.reply(200, {"total_count": len(runs), "workflow_runs": page_of(runs, query)})
        if scope[0] == "repos" and len(rest) == 4 and rest[:2] == ["actions", "runs"] and \
                rest[3] == "jobs":
            run_id = int(rest[2])
            with lock:
                listed = [{"id": j["id"], "run_id": j["run_id"], "status": j["status"],
                           "conclusion": None, "name": "build", "labels": j["labels"],
                           "runner_id": None, "runner_name": None}
                          for _, j in sorted(jobs.items())
                          if j["run_id"] == run_id and in_repo(j)]
            record({"method": "GET", "path": self.path, "status": 200})
            return self.reply(200, {"total_count": len(listed), "jobs": page_of(listed, query)})
        record({"method": "GET", "path": self.path, "status": 404})
        return self.reply(404, {"message": "Not Found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if self.path == "/_control" and isinstance(body, dict):
            return self.control(body)
        parts = self.path.strip("/").split("/")
        if len(parts) == 4 and parts[:2] == ["app", "installations"] and \
                parts[3] == "access_tokens":
            good = jwt_ok(self.headers.get("Authorization"))
            token = "ghs_" + secrets.token_hex(18)
            record({"method": "POST", "path": self.path, "status": 201 if good else 401,
                    "installation_token": token if good else None})
            if not good:
                return self.reply(401, {"message": "A JSON web token could not be decoded"})
            expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
            return self.reply(201, {"token": token,
                                    "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                    "permissions": {"organization_self_hosted_runners": "write"},
                                    "repository_selection": "all"})
        scope, rest = scope_of(parts)
        ok = scope is not None and rest == ["actions", "runners", "generate-jitconfig"]
        if ok and self.limited("POST"):
            return None
        if not ok or not isinstance(body, dict) or "runner_group_id" not in body or \
                not body.get("labels") or not body.get("name"):
            record({"method": "POST", "path": self.path, "body": body, "status": 422})
            return self.reply(422, {"message": "Invalid request."})
        with lock:
            rid = next_id[0]
            next_id[0] += 1
            runners[rid] = {"id": rid, "name": body["name"], "labels": body["labels"],
                            "busy": False}
        jit = "jit-" + secrets.token_hex(24)
        record({"method": "POST", "path": self.path, "body": body,
                "authorization": self.headers.get("Authorization"),
                "api_version": self.headers.get("X-GitHub-Api-Version"),
                "status": 201, "runner_id": rid, "encoded_jit_config": jit})
        self.reply(201, {"runner": runner_json(runners[rid]), "encoded_jit_config": jit})

    def do_DELETE(self):
        parts = self.path.strip("/").split("/")
        scope, rest = scope_of(parts)
        ok = scope is not None and len(rest) == 3 and rest[:2] == ["actions", "runners"] and \
            rest[2].isdigit()
        if ok and self.limited("DELETE"):
            return None
        if ok:
            with lock:
                ok = runners.pop(int(rest[2]), None) is not None
        record({"method": "DELETE", "path": self.path, "status": 204 if ok else 404})
        if not ok:
            return self.reply(404, {"message": "Not Found"})
        return self.reply(204)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()

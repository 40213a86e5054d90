#!/usr/bin/env python3
"""Runs the shell steps of examples/github-actions.yml or examples/gitlab-ci.yml as the CI
service would, from the current directory (a git checkout), against a real armhived.

    run_ci_example.py github|gitlab FILE.yml

Environment: ARMHIVE_SERVER, ARMHIVE_TOKEN (the CI secrets). Exits with the job's result.
The tiny test image has no `make`: once the lease exists (after the step/item that writes its
id), a stand-in is put in the guest's /usr/bin (on an SSH session's PATH) through the API's exec; it prints its arguments and
the sources it finds, so the job's output shows what ran where.

GitHub: every step with `run:` in order, each `bash -e`; `${{ secrets.X }}`, `${{ github.X }}`
and `${{ steps.ID.outputs.X }}` (from $GITHUB_OUTPUT) are substituted; after a failure only
steps with `if: always()...` run. GitLab: before_script, then script (stopping at the first
failure; two shells here, where GitLab uses one, because the guest is prepared in between: a
step that needs the other's shell state would fail here), then after_script always, in one
shell of its own as GitLab runs it; the job image's package installation
(`apt-get ...`) is skipped, the tools being on this machine already. Nothing of the steps is copied here: they come from FILE.
"""
import os
import re
import subprocess
import sys
import tempfile

import json
import urllib.request

import yaml

# The guest's stand-in for make: shows its arguments, the directory and that the sources are there.
MAKE_STANDIN = '#!/bin/sh\necho "make $* in $(pwd): $(ls | tr \'\\n\' \' \')"\n'


def prepare_guest(lease_id):
    req = urllib.request.Request(
        os.environ["ARMHIVE_SERVER"] + "/v1/leases/" + lease_id + "/exec",
        data=json.dumps({"argv": ["sh", "-c", 'cat > /usr/bin/make && chmod +x /usr/bin/make'],
                         "stdin": MAKE_STANDIN}).encode(),
        headers={"Authorization": "Bearer " + os.environ["ARMHIVE_TOKEN"],
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        reply = json.load(r)
    if reply.get("exit_code") != 0:
        raise SystemExit(f"cannot install the make stand-in: {reply}")

GITHUB = {"run_id": "4242", "run_attempt": "1", "repository": "armhive/e2e", "job": "test"}


def github(doc):
    job = next(iter(doc["jobs"].values()))
    temp = tempfile.mkdtemp(prefix="runner-temp-")
    outputs = {}
    failed = False
    env = dict(os.environ, RUNNER_TEMP=temp)

    def expand(text):
        def sub(m):
            expr = m.group(1).strip()
            if expr.startswith("secrets."):
                return os.environ[expr[len("secrets."):]]
            if expr.startswith("github."):
                return GITHUB[expr[len("github."):]]
            m2 = re.fullmatch(r"steps\.(\w+)\.outputs\.(\w+)", expr)
            if m2:
                return outputs.get(m2.group(1), {}).get(m2.group(2), "")
            raise SystemExit(f"unsupported expression: {expr}")
        return re.sub(r"\$\{\{(.*?)\}\}", sub, text)

    for k, v in job.get("env", {}).items():
        env[k] = expand(str(v))
    for step in job["steps"]:
        if "run" not in step:
            continue
        cond = str(step.get("if", ""))
        if failed and "always()" not in cond:
            continue
        if "steps.lease.outputs.id != ''" in cond and not outputs.get("lease", {}).get("id"):
            continue
        out_file = os.path.join(temp, "output-" + str(step.get("id", len(outputs))))
        open(out_file, "w").close()
        step_env = dict(env, GITHUB_OUTPUT=out_file)
        for k, v in step.get("env", {}).items():
            step_env[k] = expand(str(v))
        print(f"::step {step.get('name', '')}", flush=True)
        rc = subprocess.call(["bash", "-e", "-c", expand(step["run"])], env=step_env)
        if "id" in step:
            with open(out_file) as f:
                outputs[step["id"]] = dict(
                    line.split("=", 1) for line in f.read().splitlines() if "=" in line)
            if rc == 0 and outputs[step["id"]].get("id", "").startswith("l-"):
                prepare_guest(outputs[step["id"]]["id"])
        if rc != 0:
            print(f"::step failed with {rc}", flush=True)
            failed = True
    return 1 if failed else 0


def gitlab(doc):
    job = next(v for k, v in doc.items() if isinstance(v, dict) and "script" in v)
    env = dict(os.environ, CI_JOB_ID="4242", CI_PROJECT_PATH="armhive/e2e")
    for k, v in job.get("variables", {}).items():
        env[k] = str(v)
    # GitLab runs before_script and script in one shell, stopping at the first failure.
    before = [i for i in job.get("before_script", []) if not i.lstrip().startswith("apt-get")]
    failed = subprocess.call(["bash", "-e", "-c", "\n".join(before)], env=env) != 0
    if not failed and os.path.exists("lease.id"):
        prepare_guest(open("lease.id").read().strip())
    if not failed:
        failed = subprocess.call(["bash", "-e", "-c", "\n".join(job["script"])], env=env) != 0
    # after_script: always, in a shell of its own (nothing defined in the job's shell is there;
    # hence the examples define their helper again), its items in that one shell.
    after = job.get("after_script", [])
    if after:
        subprocess.call(["bash", "-e", "-c", "\n".join(after)], env=env)
    return 1 if failed else 0


def main():
    kind, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        doc = yaml.safe_load(f)
    return github(doc) if kind == "github" else gitlab(doc)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Takeover time of two armhived on one PostgreSQL (issue 36).

    bench/failover_bench.py --armhived build/release/daemon/armhived
                            [--kills 10] [--lease 10s] [--out FILE.json]

Starts a PostgreSQL of its own (initdb in a temporary directory, a Unix socket there and no
TCP port; as root the server runs as the postgres user) and two armhived on it, each on
libvirt's in-process test:///default driver: no guests, so what is measured is the takeover
itself (a lab's recovery of its VMs adds what a restarted armhived takes). The leader is killed
with SIGKILL `--kills` times; each time the bench measures from the kill to the moment the
standby's /healthz answers 200 (it serves the API), then starts the killed one again as the
next standby. Prints the median and the maximum and writes every figure as JSON.

The expected takeover is about one lease: the leader renews every fifth of it, so its lease
ends between 4/5 of a lease and a lease after the kill, and the standby notices at its next
renewal (every fifth of a lease) and then starts as a restarted armhived does.
"""
import argparse
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def pg_bindir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        sys.exit("failover_bench: no PostgreSQL server binaries (install postgresql-15)")
    return os.path.dirname(found[-1])


def as_postgres():
    """preexec_fn that drops to the postgres user when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return None
    pw = pwd.getpwnam("postgres")

    def drop():
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)

    return drop


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(port):
    """The /healthz status code, or 0 when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    sys.exit(f"failover_bench: {what} did not happen within {timeout} s")


def seconds(text):
    units = {"ms": 0.001, "s": 1, "m": 60}
    for suffix in ("ms", "s", "m"):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * units[suffix]
    return float(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--armhived", required=True)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--lease", default="10s", help="[store] leader_lease (2s..5m)")
    ap.add_argument("--out", help="JSON result file (default: stdout)")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="armhive-failover-")
    procs = {}
    pg = None
    try:
        drop = as_postgres()
        if drop:
            pw = pwd.getpwnam("postgres")
            os.chown(tmp, pw.pw_uid, pw.pw_gid)
        bindir = pg_bindir()
        data = os.path.join(tmp, "data")
        subprocess.run([f"{bindir}/initdb", "-D", data, "-U", "armhive", "-A", "trust",
                        "--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions"],
                       check=True, stdout=subprocess.DEVNULL, preexec_fn=drop)
        pg = subprocess.Popen([f"{bindir}/postgres", "-D", data, "-k", tmp, "-c",
                               "listen_addresses="],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=drop)
        wait_for(lambda: os.path.exists(os.path.join(tmp, ".s.PGSQL.5432")), 60,
                 "PostgreSQL start")
        time.sleep(0.5)

        ports = {name: free_port() for name in ("a", "b")}
        for name in ports:
            os.makedirs(os.path.join(tmp, name), exist_ok=True)
            with open(os.path.join(tmp, name, "armhived.toml"), "w") as f:
                f.write(f"""[server]
port = {ports[name]}
bootstrap_token_file = "{tmp}/admin.token"
[host]
name = "{name}"
state_dir = "{tmp}/{name}/state"
libvirt_uri = "test:///default"
[store]
url = "postgresql:///?host={tmp}&dbname=postgres&user=armhive"
leader_lease = "{args.lease}"
[[pools]]
name = "p"
image = "tiny"
""")

        def start(name):
            log = open(os.path.join(tmp, f"{name}.log"), "a")
            procs[name] = subprocess.Popen(
                [args.armhived, "--config", os.path.join(tmp, name, "armhived.toml")],
                stdout=log, stderr=log)

        start("a")
        wait_for(lambda: health(ports["a"]) == 200, 60, "the first leader serving")
        start("b")
        wait_for(lambda: health(ports["b"]) == 503, 60, "the standby answering")
        leader, standby = "a", "b"
        takeovers = []
        for i in range(args.kills):
            t0 = time.monotonic()
            procs[leader].send_signal(signal.SIGKILL)
            procs[leader].wait()
            wait_for(lambda: health(ports[standby]) == 200, 10 * seconds(args.lease) + 60,
                     "a takeover")
            takeovers.append(time.monotonic() - t0)
            print(f"kill {i + 1}: the standby served after {takeovers[-1]:.2f} s", file=sys.stderr)
            start(leader)
            wait_for(lambda: health(ports[leader]) == 503, 60, "the new standby answering")
            leader, standby = standby, leader
        doc = {
            "benchmark": "failover",
            "command": f"bench/failover_bench.py --kills {args.kills} --lease {args.lease}",
            "machine": {"cpus": os.cpu_count()},
            "leader_lease_s": seconds(args.lease),
            "takeover_s": takeovers,
            "median_s": statistics.median(takeovers),
            "max_s": max(takeovers),
            "median_over_lease": statistics.median(takeovers) / seconds(args.lease),
        }
        text = json.dumps(doc, indent=2)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
        print(text)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if pg is not None:
            pg.send_signal(signal.SIGINT)
            pg.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

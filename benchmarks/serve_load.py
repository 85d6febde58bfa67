"""Does a crowd of dashboard readers slow the lab down? 50 clients against `orchard serve` while the demo runs.

Each round runs the same small demo lab (patch workers, subprocess executor)
twice, in alternating order: once alone, once while `orchard serve` answers
50 concurrent clients that poll `/api/page` every second for a minute, as
the dashboard page does (it polls every 2 s; 1 s is harsher). Loopback only:
the server binds to 127.0.0.1 and the clients are bounded (50 threads, one
request in flight each).

Reported per run: the lab's wall time, every judgment's time from the
worker's end to the decision (build, tests and verdict; minus the verdict's
wait for the machine-wide measurement lock, which other work on the machine
may hold), the verdict's own
baseline median of `report/wall_ms` (does the load distort what is
measured?), and for the clients: requests, errors (anything but 200/204 or a
failed connection), latency percentiles, and the CPU seconds the server and
the clients (a process of their own) used. Medians over the rounds.

    python benchmarks/serve_load.py [--rounds 3] [--clients 50] [--seconds 60] [--clients-nice 0]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from orchard.demo.make import make_demo

HYPOTHESES = ["count-with-dict", "terse-report", "single-write", "longest-word-one-pass"]
POLL_S = 1.0


def _clients(base: str, count: int, seconds: float) -> dict[str, Any]:
    """`count` threads polling like the dashboard page for `seconds`; their requests, errors and latencies."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def get(url: str) -> tuple[int, bytes]:
        started = time.monotonic()
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, body = error.code, b""
        except OSError as error:
            with lock:
                errors.append(f"{type(error).__name__}: {error}")
            return 0, b""
        with lock:
            latencies.append(time.monotonic() - started)
            if status not in (200, 204):
                errors.append(f"HTTP {status}")
        return status, body

    def client() -> None:
        get(base)
        get(base + "static/plotly.min.js")
        version = ""
        while time.monotonic() < deadline:
            status, body = get(f"{base}api/page?since={version}")
            if status == 200:
                version = json.loads(body)["version"]
            time.sleep(POLL_S)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    ordered = sorted(latencies)

    def quantile(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")

    used = os.times()
    return {"requests": len(latencies) + len(errors), "errors": len(errors), "error_kinds": sorted(set(errors))[:5],
            "p50_ms": quantile(0.5), "p95_ms": quantile(0.95), "max_ms": quantile(1.0),
            "clients_cpu_s": round(used.user + used.system, 2)}


def _lab_numbers(root: Path) -> dict[str, Any]:
    db = sqlite3.connect(f"file:{root / 'lab.db'}?mode=ro", uri=True)
    try:
        finished = dict(db.execute("SELECT name, finished_at FROM experiments"))
        judged = []
        medians = []
        for at, name, data in db.execute("SELECT at, experiment, data FROM events WHERE kind = 'judgment'"):
            verdict = json.loads(data).get("verdict") or {}
            if finished.get(name):  # minus the wait for the machine-wide lock, which other labs may hold
                judged.append(at - finished[name] - float(verdict.get("lock_wait_ms") or 0) / 1000)
            for metric in verdict.get("metrics", []):
                if metric["key"] == "report/wall_ms" and metric.get("baseline_median") is not None:
                    medians.append(metric["baseline_median"])
        return {"judgments": len(judged), "judge_s": statistics.median(judged) if judged else float("nan"),
                "baseline_wall_ms": statistics.median(medians) if medians else float("nan")}
    finally:
        db.close()


def one_run(directory: Path, clients: int, seconds: float, clients_nice: int) -> dict[str, Any]:
    ws = make_demo(directory, workers=3, executor="subprocess", only=HYPOTHESES)
    server = None
    load: dict[str, Any] = {}
    loader = None
    if clients:
        server = subprocess.Popen([sys.executable, "-m", "orchard", "serve", str(ws.root), "--port", "0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert server.stderr is not None
        first = server.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", first)
        assert found, first
        base = found.group(1)

        def run_clients() -> None:
            # the clients run in a process of their own, so their CPU time is counted apart from the server's;
            # `--clients-nice` models browsers on other machines (they then take only CPU the lab leaves idle)
            answer = subprocess.run([sys.executable, __file__, "--client-load", base, "--clients", str(clients),
                                     "--seconds", str(seconds)], capture_output=True, text=True, check=True,
                                    preexec_fn=lambda: os.nice(clients_nice) if clients_nice else None)
            load.update(json.loads(answer.stdout))

        loader = threading.Thread(target=run_clients)
    started = time.monotonic()
    lab = subprocess.Popen([sys.executable, "-m", "orchard", "run", str(ws.root)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        if loader:
            loader.start()
        lab.wait(timeout=1800)
        wall = time.monotonic() - started
        if loader:
            loader.join()
    finally:
        if lab.poll() is None:
            lab.send_signal(signal.SIGINT)
            lab.wait(timeout=120)
        if server is not None:
            times = psutil.Process(server.pid).cpu_times()
            load["server_cpu_s"] = round(times.user + times.system, 2)
            server.send_signal(signal.SIGINT)
            server.wait(timeout=60)
            if server.stderr:
                server.stderr.close()
    return {"clients": clients, "lab_wall_s": wall, "exit": lab.returncode, **_lab_numbers(ws.root), **load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients-nice", type=int, default=0,
                        help="niceness of the client process (0: as harsh as the lab's own priority)")
    parser.add_argument("--client-load", metavar="URL", help=argparse.SUPPRESS)  # the client process itself
    args = parser.parse_args()
    if args.client_load:
        print(json.dumps(_clients(args.client_load, args.clients, args.seconds)))
        return
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="orchard-serve-load-") as scratch:
        for round_ in range(args.rounds):
            order = (0, args.clients) if round_ % 2 == 0 else (args.clients, 0)
            for clients in order:
                result = one_run(Path(scratch) / f"r{round_}-c{clients}", clients, args.seconds,
                                 args.clients_nice)
                runs.append(result)
                print(json.dumps(result, sort_keys=True), flush=True)
    for clients in (0, args.clients):
        mine = [r for r in runs if r["clients"] == clients]
        keys = ["lab_wall_s", "judge_s", "baseline_wall_ms"] + (["requests", "errors", "p50_ms", "p95_ms", "max_ms",
                                                                  "server_cpu_s", "clients_cpu_s"] if clients else [])
        summary = {k: round(statistics.median(r[k] for r in mine), 3) for k in keys}
        print(f"{clients:>3} clients, median of {len(mine)}: {json.dumps(summary)}")


if __name__ == "__main__":
    main()

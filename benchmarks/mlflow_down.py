"""What a tracking server that is down costs a run with `log.mlflow = true` (issue 50 item 8).

    python benchmarks/mlflow_down.py [--preset quickstart] [--runs 3] [--steps 20]

Three kinds of run of the same preset, in rounds that alternate them: without MLflow; with
MLFLOW_TRACKING_URI at a port nothing listens on (refusing); at a server on 127.0.0.1 that
accepts connections and never answers (hanging). Each is `amptui run` in its own process; per
run: seconds from spawn to the first step record (its `t`), the median step_time_ms of its step
records, and the wall time to exit. Goals: the first step within 5 s of the run without MLflow,
the step time within noise (the spread of the runs without MLflow). Prints a table; exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def hanging_server() -> tuple[str, threading.Event]:
    """http://127.0.0.1:PORT: connections accepted, held, never answered."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.settimeout(0.2)
    stop, held = threading.Event(), []

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue
        for conn in held:
            conn.close()
        sock.close()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", stop


def refusing_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def one_run(preset: str, steps: int, uri: str | None, tmp: Path, env: dict) -> dict:
    runs = tmp / f"runs-{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "amptui", "--runs-dir", str(runs), "run", preset, "--set", "run.device=cpu",
           "--set", f"run.max_steps={steps}", "--set", "log.every=1", "--set", "log.checkpoint_every=0",
           "--set", "log.eval_every=0"]
    run_env = dict(env)
    if uri:
        cmd += ["--set", "log.mlflow=true"]
        run_env["MLFLOW_TRACKING_URI"] = uri
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=900)
    wall = time.time() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    (run,) = [p for p in runs.iterdir() if p.is_dir()]
    recs = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    step_recs = [r for r in recs if r["kind"] == "step"]
    return {"first_step_s": step_recs[0]["t"] - t0, "step_ms": statistics.median(r["step_time_ms"] for r in step_recs),
            "wall_s": wall, "said": (run / "output.log").read_text().count("log.mlflow")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="quickstart")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    hang_url, stop = hanging_server()
    kinds = {"without MLflow": None, "MLflow refusing": refusing_url(), "MLflow hanging": hang_url}
    results: dict[str, list[dict]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="amptui-mlflow-down-") as tmp:
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        load0 = os.getloadavg()[0]
        for round_ in range(args.runs):
            order = list(kinds) if round_ % 2 == 0 else list(reversed(kinds))
            for kind in order:
                results[kind].append(one_run(args.preset, args.steps, kinds[kind], Path(tmp), env))
    stop.set()
    base = results["without MLflow"]
    base_first = statistics.median(r["first_step_s"] for r in base)
    base_step = statistics.median(r["step_ms"] for r in base)
    noise = max(r["step_ms"] for r in base) / min(r["step_ms"] for r in base)
    print(f"{args.preset}, {args.steps} steps, median of {args.runs}; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    print("| run | first step s (median) | vs without | step ms (median) | ratio | wall s | lines saying log.mlflow | goal |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, rows in results.items():
        first = statistics.median(r["first_step_s"] for r in rows)
        step = statistics.median(r["step_ms"] for r in rows)
        ok = first - base_first <= 5.0 and step / base_step <= max(noise, 1.05)
        print(f"| {kind} | {first:.2f} | {first - base_first:+.2f} | {step:.1f} | {step / base_step:.2f}x | "
              f"{statistics.median(r['wall_s'] for r in rows):.1f} | {max(r['said'] for r in rows)} | "
              f"{'' if kind == 'without MLflow' else ('PASS' if ok else 'MISS')} |")
    print(f"noise: the runs without MLflow spread {noise:.2f}x in step time")


if __name__ == "__main__":
    main()

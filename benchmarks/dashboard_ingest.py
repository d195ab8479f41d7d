"""Dashboard ingest benchmark (issue 7): the real `amptui watch` attached to a run whose
events.jsonl grows at 1,000 records/s for a minute, and a million-record history opened cold.

    python benchmarks/dashboard_ingest.py [--rate 1000] [--seconds 60] [--repeat 2]
                                          [--history 1000000] [--opens 3] [--skip-live] [--skip-history]

Part 1, live: a synthetic run folder (config.toml from a real 4-step `amptui run quickstart`
with float16 + GradScaler, so every panel including the loss scale is live; a `start` record
modelled on that run's; run.json naming the writer process, so the run is `running`). A separate
writer process appends realistic records at the rate (step records with mem; every 200 steps a
`mem` record, every 500 a `scaler` growth/backoff with overflow names, every 6,000 an `epoch`
record and an output.log line), one write + flush per record, as the trainer does. The dashboard
runs in a 110x34 pseudo-terminal (benchmarks/ptyterm.py) that answers Textual's synchronized-
output query, so each frame is bracketed by ESC[?2026h..ESC[?2026l and counted from outside.
Measured for the dashboard process over the minute: CPU (psutil cpu_times delta, % of one core),
RSS at start/middle/end and peak (VmHWM), frames per second, and how far the screen's
"step N/TOTAL" lags the file (every 5 s, at the moment the writer stops, and how long until
the final step is on screen).

Part 2, history: a finished run with --history step records (plus ~1% mem/scaler/epoch records)
and an end record; time from spawning `amptui watch` until the screen shows "step N/N", until
the header says "completed" (history fully read), and the peak RSS.

Goals (issue 7): keeps up with < 25% of one core and flat memory; the million-record history
opens in under 2 s. Prints a table; exits 0 whether or not a goal is met.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ptyterm import PtyTerm, describe_amptui, proc_status  # noqa: E402

COLS, ROWS = 110, 34
CPU_GOAL = 25.0          # % of one core
OPEN_GOAL_S = 2.0
FLAT_MEM_MIB = 20.0      # RSS end - RSS start above this = not flat
FLAT_LATE_MIB = 5.0      # RSS end - RSS mid above this = still growing
STEP_RE = re.compile(r"step (\d+)/(\d+)")
AMPTUI = str(Path(sys.executable).with_name("amptui"))

MEM_EVERY, SCALER_EVERY, EPOCH_EVERY = 200, 500, 6000
LAYERS = ["features.0.weight", "features.3.weight", "features.6.weight", "classifier.weight",
          "classifier.bias", "features.0.bias"]


# --- the synthetic run ----------------------------------------------------------------------------

def real_template(work: Path) -> tuple[str, dict]:
    """config.toml text and start record of a real (4-step) quickstart run with fp16 + GradScaler."""
    runs = work / "template-runs"
    cmd = [AMPTUI, "run", "quickstart", "--set", "run.max_steps=4", "--set", "amp.dtype=\"float16\"",
           "--set", "amp.grad_scaler=true", "--runs-dir", str(runs)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, AMPTUI_RUNS_DIR=str(runs)))
    run = next(p for p in runs.iterdir() if (p / "config.toml").is_file())
    start = json.loads((run / "events.jsonl").open().readline())
    return (run / "config.toml").read_text(), start


def make_run(root: Path, run_id: str, config_text: str) -> Path:
    run = root / run_id
    run.mkdir(parents=True)
    (run / "config.toml").write_text(config_text.replace("# amptui run ", f"# amptui run {run_id} (synthetic, was ", 1))
    (run / "output.log").write_text(f"start {run_id}: quickstart (synthetic benchmark run)\n")
    return run


def start_record(template: dict, run_id: str, total_steps: int, steps_per_epoch: int, pid: int) -> dict:
    rec = dict(template)
    rec.update(t=round(time.time(), 6), run_id=run_id, pid=pid, total_steps=total_steps,
               steps_per_epoch=steps_per_epoch, epochs=math.ceil(total_steps / steps_per_epoch))
    rec["config"] = json.loads(json.dumps(template["config"]))
    rec["config"]["run"]["max_steps"] = total_steps
    return rec


def records(t_of, n_records: int | None = None):
    """Realistic records in trainer order; yields (record, output-log line or None)."""
    step, k, skipped_total, scale = 0, 0, 0, 65536.0
    rss, peak = 760_000_000, 760_000_000
    epoch_loss = []
    while n_records is None or k < n_records:
        step += 1
        epoch = (step - 1) // EPOCH_EVERY + 1
        loss = 2.3 * math.exp(-step / 20000) + 0.1 + 0.05 * math.sin(step / 37.0)
        epoch_loss.append(loss)
        skipped = 1 if step % SCALER_EVERY == 0 and (step // SCALER_EVERY) % 2 == 0 else 0
        skipped_total += skipped
        rss += 4096 if step % 3 else -8192
        peak = max(peak, rss)
        yield {"v": 1, "kind": "step", "t": t_of(), "rank": 0, "step": step, "epoch": epoch, "loss": loss,
               "lr": 0.003 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / 60000))), "scale": scale,
               "skipped": skipped, "skipped_total": skipped_total, "samples_per_s": 64000.0 + (step % 97),
               "step_time_ms": 1.0 + 0.01 * (step % 13), "mem": {"rss": rss, "peak_rss": peak},
               "tflops": 0.064 + 0.001 * (step % 7)}, None
        k += 1
        if step % MEM_EVERY == 0 and (n_records is None or k < n_records):
            yield {"v": 1, "kind": "mem", "t": t_of(), "rank": 0, "rss": rss, "peak_rss": peak, "devices": []}, None
            k += 1
        if step % SCALER_EVERY == 0 and (n_records is None or k < n_records):
            if skipped:
                rec = {"v": 1, "kind": "scaler", "t": t_of(), "rank": 0, "step": step, "event": "backoff",
                       "old_scale": scale, "new_scale": scale / 2, "overflow": LAYERS[: 1 + step % 5]}
                scale /= 2
            else:
                rec = {"v": 1, "kind": "scaler", "t": t_of(), "rank": 0, "step": step, "event": "growth",
                       "old_scale": scale, "new_scale": scale * 2}
                scale *= 2
            yield rec, None
            k += 1
        if step % EPOCH_EVERY == 0 and (n_records is None or k < n_records):
            train_loss = sum(epoch_loss) / len(epoch_loss)
            epoch_loss = []
            yield ({"v": 1, "kind": "epoch", "t": t_of(), "rank": 0, "epoch": epoch, "train_loss": train_loss,
                    "val_loss": train_loss * 1.05, "val_acc": min(0.99, 0.1 + step / 70000), "epoch_time_s": 6.0},
                   f"epoch {epoch}: train loss {train_loss:.4f}, val loss {train_loss * 1.05:.4f}")
            k += 1


def count_steps(n_records: int) -> int:
    return sum(1 for rec, _ in records(lambda: 0.0, n_records) if rec["kind"] == "step")


def dumps(rec: dict) -> str:
    return json.dumps(rec, separators=(",", ":")) + "\n"


def writer_main(args) -> int:
    """The writer process: run.json (own pid), start record, wait for the go file, then append at
    the rate for the duration; then write the done file and stay alive (the run stays `running`)."""
    sys.path.insert(0, str(HERE.parent))
    from amptui.core.run.runs import write_launch_info

    run = Path(args.writer)
    n = int(args.rate * args.seconds)
    total = count_steps(n)
    template = json.loads(Path(args.template).read_text())
    write_launch_info(run, os.getpid(), [sys.executable, __file__, "--writer", str(run)])
    fh = open(run / "events.jsonl", "a", encoding="utf-8")
    fh.write(dumps(start_record(template, run.name, total, EPOCH_EVERY, os.getpid())))
    fh.flush()
    log = open(run / "output.log", "a", encoding="utf-8")
    go = run.parent / "go"
    while not go.exists():
        time.sleep(0.01)
    t0 = time.time()
    gen = records(lambda: round(time.time(), 6), n)
    written, last_step = 0, 0
    for_each_sleep = 0.002
    while written < n:
        due = min(n, int((time.time() - t0) * args.rate) + 1)
        while written < due:
            rec, line = next(gen)
            fh.write(dumps(rec))
            fh.flush()
            if line:
                log.write(line + "\n")
                log.flush()
            if rec["kind"] == "step":
                last_step = rec["step"]
            written += 1
        time.sleep(for_each_sleep)
    t1 = time.time()
    (run.parent / "done.json").write_text(json.dumps({"records": written, "last_step": last_step,
                                                      "total_steps": total, "t0": t0, "t1": t1}))
    while True:  # stay alive: the run is `running` until the benchmark kills us
        time.sleep(1)


# --- measuring ---------------------------------------------------------------------------------

def last_written_step(events: Path) -> tuple[int, float]:
    with open(events, "rb") as fh:
        fh.seek(max(0, events.stat().st_size - 8192))
        lines = fh.read().split(b"\n")
    for line in reversed(lines[:-1]):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("kind") == "step":
            return rec["step"], rec["t"]
    return 0, 0.0


def shown_step(text: str) -> int | None:
    m = STEP_RE.search(text)
    return int(m.group(1)) if m else None


def cpu_s(proc) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def mib(x: float | None) -> str:
    return "-" if x is None else f"{x / 2**20:.1f}"


def live_once(work: Path, config_text: str, template: dict, rate: int, seconds: float, idx: int) -> dict:
    import psutil

    root = work / f"live-{idx}"
    run_id = f"20260101-000000-ingest-bench-{idx:02d}"
    run = make_run(root, run_id, config_text)
    tpl = work / "start-template.json"
    tpl.write_text(json.dumps(template))
    writer = subprocess.Popen([sys.executable, __file__, "--writer", str(run), "--template", str(tpl),
                               "--rate", str(rate), "--seconds", str(seconds)])
    term = None
    try:
        while not (run / "run.json").exists() or not (run / "events.jsonl").exists():
            time.sleep(0.01)
        time.sleep(0.1)
        term = PtyTerm([AMPTUI, "watch", run_id, "--runs-dir", str(root)], COLS, ROWS)
        _, painted = term.wait_for(lambda s: "step 0/" in s and "running" in s, 30)
        if painted is None:
            raise RuntimeError("dashboard never showed the run:\n" + term.text())
        time.sleep(3.0)  # settle: imports done, first plots drawn
        dash = psutil.Process(term.pid)
        idle_f0, idle_c0, idle_t0 = term.frames, cpu_s(dash), time.monotonic()
        time.sleep(2.0)
        idle_fps = (term.frames - idle_f0) / (time.monotonic() - idle_t0)
        idle_cpu = 100 * (cpu_s(dash) - idle_c0) / (time.monotonic() - idle_t0)

        rss_start = dash.memory_info().rss
        f0, c0, m0 = term.frames, cpu_s(dash), time.monotonic()
        (root / "go").write_text("go")
        samples = []     # (t, rss, cpu_s)
        lags = []        # (t, written, shown)
        next_lag = 5.0
        done = root / "done.json"
        next_sample = 0.0
        while not done.exists():
            time.sleep(0.02)
            el = time.monotonic() - m0
            if el < next_sample:
                continue
            next_sample += 0.25
            samples.append((el, dash.memory_info().rss, cpu_s(dash)))
            if el >= next_lag:
                next_lag += 5.0
                written, _ = last_written_step(run / "events.jsonl")
                lags.append((el, written, shown_step(term.text())))
            if el > seconds + 30:
                raise RuntimeError("writer did not finish")
        m1 = time.monotonic()
        c1, f1 = cpu_s(dash), term.frames
        info = json.loads(done.read_text())
        final = info["last_step"]
        shown_at_end = shown_step(term.text())
        # how long until the final step is on screen (measured from the writer's last record)
        _, _ = term.wait_for(lambda s: shown_step(s) == final, 30, poll=0.01)
        caught_up = time.time() - info["t1"] if shown_step(term.text()) == final else None
        status = proc_status(term.pid)
        rss_end = dash.memory_info().rss
        window = m1 - m0
        mid = min(samples, key=lambda s: abs(s[0] - window / 2))
        step_rate = final / (info["t1"] - info["t0"])
        # CPU in 10 s slices, to see whether it creeps up as the run grows
        slices = []
        for a in range(0, int(window), 10):
            s_a = min(samples, key=lambda s: abs(s[0] - a))
            s_b = min(samples, key=lambda s: abs(s[0] - min(window, a + 10)))
            if s_b[0] > s_a[0]:
                slices.append(100 * (s_b[2] - s_a[2]) / (s_b[0] - s_a[0]))
        return {
            "records": info["records"], "write_s": info["t1"] - info["t0"], "window_s": window,
            "cpu_pct": 100 * (c1 - c0) / window, "cpu_slices": slices, "idle_cpu_pct": idle_cpu,
            "fps": (f1 - f0) / window, "idle_fps": idle_fps, "frames": f1 - f0,
            "rss_start": rss_start, "rss_mid": mid[1], "rss_end": rss_end,
            "rss_peak_window": max(s[1] for s in samples), "vmhwm": status.get("VmHWM"),
            "final_step": final, "shown_at_end": shown_at_end,
            "lag_end_steps": None if shown_at_end is None else final - shown_at_end,
            "caught_up_s": caught_up, "lags": lags, "step_rate": step_rate,
            "screen": term.text(), "load": os.getloadavg(),
        }
    finally:
        if term is not None:
            term.close()
        writer.terminate()
        try:
            writer.wait(5)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait()


def write_history(work: Path, config_text: str, template: dict, n_steps: int) -> tuple[Path, str, int]:
    root = work / "history"
    run_id = f"20260101-000000-history-{n_steps}"
    run = make_run(root, run_id, config_text)
    from amptui.core.run.runs import write_launch_info  # noqa: E402  (imported late: keep --help light)

    t = [1_767_225_600.0]

    def t_of() -> float:
        t[0] += 0.001
        return round(t[0], 6)

    write_launch_info(run, os.getpid(), [sys.executable, "-m", "amptui.trainer", str(run)])
    with open(run / "events.jsonl", "w", encoding="utf-8") as fh:
        fh.write(dumps(start_record(template, run_id, n_steps, EPOCH_EVERY, os.getpid())
                       | {"t": 1_767_225_600.0}))
        n = 0
        buf = []
        for rec, _ in records(t_of):
            if rec["kind"] == "step" and rec["step"] > n_steps:
                break
            buf.append(dumps(rec))
            n += 1
            if len(buf) >= 10000:
                fh.write("".join(buf))
                buf = []
        fh.write("".join(buf))
        fh.write(dumps({"v": 1, "kind": "end", "t": t_of(), "rank": 0, "status": "completed",
                        "total_time_s": t[0] - 1_767_225_600.0, "steps": n_steps, "final_loss": 0.1,
                        "val_acc": 0.97, "peak_mem": 800_000_000}))
    return root, run_id, n + 2


def history_once(root: Path, run_id: str, n_steps: int) -> dict:
    term = PtyTerm([AMPTUI, "watch", run_id, "--runs-dir", str(root)], COLS, ROWS)
    try:
        target = f"step {n_steps}/{n_steps}"
        _, first = term.wait_for(lambda s: "step " in s and "/" in s, 60, poll=0.01)
        _, t_step = term.wait_for(lambda s: target in s, 60, poll=0.01)
        _, t_done = term.wait_for(lambda s: target in s and "completed" in s, 60, poll=0.01)
        time.sleep(1.0)
        status = proc_status(term.pid)
        return {"first_paint_s": first, "final_step_s": t_step, "completed_s": t_done,
                "vmhwm": status.get("VmHWM"), "rss_after": status.get("VmRSS"), "screen": term.text(),
                "load": os.getloadavg()}
    finally:
        term.close()


# --- main ----------------------------------------------------------------------------------------

def verdict(ok: bool | None) -> str:
    return "PASS" if ok else "MISS"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=1000, help="records per second (default 1000)")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long the file grows (default 60)")
    ap.add_argument("--repeat", type=int, default=2, help="live measurements (default 2)")
    ap.add_argument("--history", type=int, default=1_000_000, help="step records in the history (default 1e6)")
    ap.add_argument("--opens", type=int, default=3, help="cold opens of the history (default 3)")
    ap.add_argument("--skip-live", action="store_true")
    ap.add_argument("--skip-history", action="store_true")
    ap.add_argument("--show-screen", action="store_true", help="print the last screen of each part")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    ap.add_argument("--writer", help=argparse.SUPPRESS)
    ap.add_argument("--template", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.writer:
        return writer_main(args)
    try:
        import psutil  # noqa: F401
        import pyte  # noqa: F401
    except ImportError as exc:
        print(f"needs {exc.name}: pip install {exc.name} (benchmark-only dependency)", file=sys.stderr)
        return 0

    sys.path.insert(0, str(HERE.parent))
    work = Path(tempfile.mkdtemp(prefix="amptui-ingest-"))
    print(describe_amptui(), flush=True)
    print(f"work dir {work}; load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        config_text, template = real_template(work)
        live, hist = [], []
        if not args.skip_live:
            for i in range(args.repeat):
                r = live_once(work, config_text, template, args.rate, args.seconds, i)
                live.append(r)
                print(f"live #{i + 1}: cpu {r['cpu_pct']:.1f}% of a core, {r['fps']:.2f} frames/s, "
                      f"rss {mib(r['rss_start'])}->{mib(r['rss_end'])} MiB, final step on screen "
                      f"{r['caught_up_s'] if r['caught_up_s'] is None else round(r['caught_up_s'], 2)} s after the last write, "
                      f"load {r['load'][0]:.2f}", flush=True)
                if args.show_screen:
                    print(r["screen"])
        if not args.skip_history:
            t = time.monotonic()
            root, run_id, n_rec = write_history(work, config_text, template, args.history)
            size = (root / run_id / "events.jsonl").stat().st_size
            print(f"history: {n_rec:,} records, {size / 2**20:.0f} MiB, written in {time.monotonic() - t:.1f} s",
                  flush=True)
            for i in range(args.opens):
                r = history_once(root, run_id, args.history)
                hist.append(r)
                print(f"open #{i + 1}: final step on screen after {r['final_step_s']} s, completed after "
                      f"{r['completed_s']} s, peak rss {mib(r['vmhwm'])} MiB, load {r['load'][0]:.2f}", flush=True)
                if args.show_screen and i == 0:
                    print(r["screen"])
        report(live, hist, args, n_rec if hist else 0)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def report(live: list[dict], hist: list[dict], args, n_rec: int) -> None:
    print()
    if live:
        print(f"## Live ingest: {args.rate} records/s for {args.seconds:g} s, `amptui watch` at {COLS}x{ROWS}")
        print()
        print("| run | load avg (1m) | CPU % of one core | CPU per 10 s slice | idle CPU % | frames/s | idle frames/s "
              "| RSS start / mid / end MiB | peak RSS (VmHWM) MiB | max lag (5 s samples) | final step shown after |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for i, r in enumerate(live):
            worst = max((w - sh for _, w, sh in r["lags"] if sh is not None), default=None)
            lag = "-" if worst is None else f"{worst} steps ({worst / r['step_rate']:.2f} s)"
            cu = "never" if r["caught_up_s"] is None else f"{r['caught_up_s']:.2f} s"
            print(f"| {i + 1} | {r['load'][0]:.2f} | {r['cpu_pct']:.1f} | {' '.join(f'{x:.0f}' for x in r['cpu_slices'])} "
                  f"| {r['idle_cpu_pct']:.1f} | {r['fps']:.2f} | {r['idle_fps']:.2f} "
                  f"| {mib(r['rss_start'])} / {mib(r['rss_mid'])} / {mib(r['rss_end'])} | {mib(r['vmhwm'])} "
                  f"| {lag} | {cu} |")
        print()
        for i, r in enumerate(live):
            lags = ", ".join(f"{t:.0f}s: {w - s if s is not None else '?'}" for t, w, s in r["lags"])
            print(f"run {i + 1} lag in steps (written - shown) every 5 s: {lags}")
        print()
        worst_cpu = max(r["cpu_pct"] for r in live)
        growth = max(r["rss_end"] - r["rss_start"] for r in live) / 2**20
        late = max(r["rss_end"] - r["rss_mid"] for r in live) / 2**20
        keeps_up = all(r["caught_up_s"] is not None and r["caught_up_s"] < 1.0 for r in live) and all(
            all(s is not None and (w - s) < 2 * args.rate for _, w, s in r["lags"]) for r in live)
        print(f"- goal CPU < {CPU_GOAL:g}% of one core: worst {worst_cpu:.1f}% -> {verdict(worst_cpu < CPU_GOAL)}")
        print(f"- goal flat memory (RSS growth < {FLAT_MEM_MIB:g} MiB over the minute and < {FLAT_LATE_MIB:g} MiB "
              f"in its second half): worst growth {growth:+.1f} MiB, second half {late:+.1f} MiB -> "
              f"{verdict(growth < FLAT_MEM_MIB and late < FLAT_LATE_MIB)}")
        print(f"- goal keeps up (lag < 2 s of records at every sample, final step on screen < 1 s after the last "
              f"write): {verdict(keeps_up)}")
        print()
    if hist:
        print(f"## History: {n_rec:,} records ({args.history:,} steps), cold `amptui watch` at {COLS}x{ROWS}")
        print()
        print("| open | load avg (1m) | first paint s | final step on screen s | 'completed' shown s | peak RSS MiB "
              "| RSS after MiB |")
        print("|---|---|---|---|---|---|---|")
        for i, r in enumerate(hist):
            def f(x):
                return "never" if x is None else f"{x:.2f}"
            print(f"| {i + 1} | {r['load'][0]:.2f} | {f(r['first_paint_s'])} | {f(r['final_step_s'])} "
                  f"| {f(r['completed_s'])} | {mib(r['vmhwm'])} | {mib(r['rss_after'])} |")
        times = [r["completed_s"] for r in hist if r["completed_s"] is not None]
        med = statistics.median(times) if len(times) == len(hist) else None
        print()
        print(f"- goal a million-record history opens in < {OPEN_GOAL_S:g} s (median time to the final step and "
              f"'completed'): {'never' if med is None else f'{med:.2f} s'} -> "
              f"{verdict(med is not None and med < OPEN_GOAL_S)}")


if __name__ == "__main__":
    sys.exit(main())

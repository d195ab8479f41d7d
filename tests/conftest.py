"""Shared fixtures: every test gets its own runs folder and saved-presets folder, and two ways to run
the `amptui` command line: in this process (`cli`, the fast lane) or as a real subprocess (`amptui`,
for tests marked `slow`)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.dashboard import root  # noqa: F401 - the dashboard tests' fixture: canned runs in ./runs
from support.webstub import stand_in_certs, tls, trainjob_stub  # noqa: F401 - the Kubeflow status stub, its CA, TLS: tests in two tiers

# The shared helpers live in the tests/support/ package (issue 42): import them from there.

FAILED = pytest.StashKey[bool]()  # a phase of this test failed (stops_what_it_started reads it)
PINNED_RATES = "AMPTUI_TEST_PINNED_RATES"  # --cpu-bfloat16 slow|fast: the folder of the pinned peak cache


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Runs and saved presets go to temp folders; the working directory is a temp folder too. Under
    --cpu-bfloat16 each test reads a copy of the pinned rates (doctor measures afresh and keeps the
    higher rate: one test's measurement must not change what the next one sees)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    # the state folder beside tmp_path, not in it: tests list what they write there
    state = tmp_path.parent / f"{tmp_path.name}-xdg-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("AMPTUI_RUNS_DIR", str(tmp_path / "runs"))
    # the once-per-machine note on a CUDA build of torch without a GPU counts as said: whether a test
    # sees it would depend on which torch this machine has (tests/functional/test_first_hour.py unsays it)
    said = state / "amptui" / "cpu-torch-note.json"
    said.parent.mkdir(parents=True, exist_ok=True)
    said.write_text('{"said": true}')
    if os.environ.get(PINNED_RATES):
        import shutil

        from amptui.machine import peaks

        shutil.copytree(os.environ[PINNED_RATES], tmp_path / "xdg-cache")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
        peaks.forget_measured_peaks()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def pytest_addoption(parser):
    parser.addoption("--cpu-bfloat16", choices=("measured", "slow", "fast"), default="measured",
                     help="the CPU's reduced-precision matmul rates the tests see: this CPU's measured ones "
                          "(default), or those of a CPU that only emulates bfloat16 (slow: 85 times slower than "
                          "float32, as on CPUs without AVX512-BF16/AMX) or computes it fast (twice float32)")


# The caller's variables that change what amptui, torch or Python do: cleared for the whole session
# (this process, xdist's workers and every process a test starts), so a CI image's PYTHONWARNINGS=ignore,
# a training box's MLFLOW_TRACKING_URI or a shell inside a torchrun job (RANK, WORLD_SIZE) gives the same
# results as a clean shell. Tests that need one set it themselves (monkeypatch / env=).
# CUDA_VISIBLE_DEVICES stays (the `gpu` tests run on the GPUs the caller chose); every other test hides
# the GPUs itself (pinned_to_cpu).
CALLERS_VARIABLES = (
    "PYTHONWARNINGS", "PYTHONINSPECT", "PYTHONBREAKPOINT", "PYTHONOPTIMIZE", "PYTHONDONTWRITEBYTECODE",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCH_NUM_THREADS",
    "CUDA_LAUNCH_BLOCKING", "TORCH_LOGS", "TORCH_SHOW_CPP_STACKTRACES",
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME",
    "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM_PROGRAM",
    "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "WANDB_MODE",
)
CALLERS_PREFIXES = ("AMPTUI_", "TORCHELASTIC_", "TEXTUAL_", "SLURM_", "SKYPILOT_", "KUBEFLOW_TRAINER_")
SESSION_CACHE = "AMPTUI_TEST_SESSION_CACHE"
SESSION_STATE = "AMPTUI_TEST_SESSION_STATE"  # the session's own XDG state and config folders (isolate_from_callers_environment)


def isolate_from_callers_environment(worker: bool) -> list[str]:
    """Clear CALLERS_VARIABLES and CALLERS_PREFIXES from os.environ and undo what -W/PYTHONWARNINGS did to
    this interpreter's warning filters (Python read them before any test ran); returns the names cleared.
    The peak-rate cache is the session's own (a user's cached rates would change tests' verdicts),
    measured once per session and shared by every process the tests start."""
    import tempfile
    import warnings

    # an xdist worker inherits its controller's environment, cleared already and then added to by
    # plugins (pytest-textual-snapshot's TEXTUAL_SNAPSHOT_TEMPDIR): a worker clears nothing
    cleared = [] if worker else [key for key in list(os.environ)
                                 if key in CALLERS_VARIABLES or key.startswith(CALLERS_PREFIXES)]
    for key in cleared:
        del os.environ[key]
    # One OpenMP thread for torch in every process of the suite (the test processes and every trainer, script
    # and torchrun rank they start): on a 2-core box running two workers, each starting trainers, a second
    # thread only waits on the first; under load a tiny model's step took 20x longer with two threads.
    os.environ["OMP_NUM_THREADS"] = "1"
    if "torch" in sys.modules:  # imported before the suite started: it read the variable already
        sys.modules["torch"].set_num_threads(1)
    if sys.warnoptions:  # -W / PYTHONWARNINGS: back to Python's documented default filters
        sys.warnoptions.clear()
        warnings.resetwarnings()
        for action, category, module in (("ignore", ResourceWarning, ""), ("ignore", ImportWarning, ""),
                                         ("ignore", PendingDeprecationWarning, ""),
                                         ("ignore", DeprecationWarning, ""),
                                         ("default", DeprecationWarning, "__main__")):
            warnings.filterwarnings(action, category=category, module=module)
    if not os.environ.get(SESSION_CACHE):
        os.environ[SESSION_CACHE] = tempfile.mkdtemp(prefix="amptui-test-cache-")
    os.environ["XDG_CACHE_HOME"] = os.environ[SESSION_CACHE]
    # amptui's state (runs-folders.json, trusted code) and saved presets: the session's own, also for what runs
    # outside the per-test `isolated` fixture (module fixtures that start real runs), never the user's (issue 51)
    if not os.environ.get(SESSION_STATE):
        os.environ[SESSION_STATE] = tempfile.mkdtemp(prefix="amptui-test-state-")
    os.environ["XDG_STATE_HOME"] = os.path.join(os.environ[SESSION_STATE], "state")
    os.environ["XDG_CONFIG_HOME"] = os.path.join(os.environ[SESSION_STATE], "config")
    return cleared


def pytest_configure(config):
    """The caller's environment cleared (isolate_from_callers_environment). --cpu-bfloat16 slow|fast:
    every test and every process it starts reads a peak cache of its own (XDG_CACHE_HOME) that gives
    this CPU's float32 rate and the chosen bfloat16/float16 rates, so the suite can be run as on either
    kind of CPU (both must pass)."""
    isolate_from_callers_environment(worker=hasattr(config, "workerinput"))
    # A suite started as `pytest ... &` by a shell without job control inherits SIGINT ignored, and so
    # would every process a test starts: the tests that stop a run, an A/B or a stand-in process with
    # SIGINT (Ctrl-C's protocol) would wait in vain. Take the disposition back, as amptui does.
    from amptui.jobs.spawn import hear_interrupts

    hear_interrupts()
    choice = config.getoption("--cpu-bfloat16")
    if choice == "measured" or hasattr(config, "workerinput"):  # xdist workers inherit the controller's env
        return
    import tempfile

    import torch

    from amptui.machine import peaks

    full = peaks.peak_tflops("cpu", torch.float32)
    ratio = 1 / 85 if choice == "slow" else 2.0
    cache = Path(tempfile.mkdtemp(prefix=f"amptui-cpu-{choice}-bf16-"))
    os.environ["XDG_CACHE_HOME"] = os.environ[PINNED_RATES] = str(cache)
    peaks.forget_measured_peaks()
    rates = {peaks.peak_cache_key("cpu", torch.float32): full}
    for dtype in (torch.bfloat16, torch.float16):
        rates[peaks.peak_cache_key("cpu", dtype)] = full * ratio
    path = peaks.peak_cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": peaks.PEAK_CACHE_FORMAT, "peak_tflops": rates}))


def pytest_collection_finish(session):
    """Garbage collection sized for a test session: what collection imported (torch, Textual, every
    test module: most of the heap, kept for the whole session anyway) frozen where the cyclic collector
    no longer walks it, and the youngest generation collected after 20,000 new objects rather than 700.
    A Textual pilot makes millions of short-lived objects, and the collections they set off took a
    sixth of the dashboard tests' CPU time. Only when garbage cycles are found changes, not whether."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent under -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """`-n` without `--dist` spreads the tests by work stealing: a worker that runs out takes some of another's.
    xdist's default hands every test out at the start, and the fast lane's last minute ran on one worker while
    the other idled (2 cores: 205-213 s, 136-175 s stealing). A `--dist` given on the command line is kept."""
    if config.getvalue("dist") != "load" or any(arg.startswith(("--dist", "-d")) for arg in config.invocation_params.args):
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


ONE_PROCESS_TIERS = ("unit", "functional")  # tests/process is the tier whose tests start processes


@pytest.hookimpl(optionalhook=True, wrapper=True)  # pytest-xdist's hook: absent under -p no:xdist
def pytest_xdist_auto_num_workers(config):
    """`-n auto` on the one-process tiers only (the fast lane): one worker more than the cores. A quarter
    of those tests' time is waiting (a Textual pilot on its app's idle checks and timers, a stand-in
    server on its socket), which a third worker fills on two cores (the lane's CPU stays the same).
    Anywhere tests/process runs, its tests' own processes fill the cores: one worker a core, as xdist
    counts. PYTEST_XDIST_AUTO_NUM_WORKERS, when set, is the number."""
    count = yield
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or not config.args:
        return count
    tests = Path(__file__).parent
    tiers = [tests / tier for tier in ONE_PROCESS_TIERS]
    base = config.invocation_params.dir
    paths = [(base / arg.split("::")[0]).resolve() for arg in config.args]
    return count + 1 if all(any(p.is_relative_to(t) for t in tiers) for p in paths) else count


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput") and os.environ.get(SESSION_CACHE):  # the controller made it
        import shutil

        shutil.rmtree(os.environ.pop(SESSION_CACHE), ignore_errors=True)


def cuda_available() -> bool:
    """This machine's real answer (asked before any test hides the GPUs)."""
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` need CUDA: skipped, saying so, where there is none."""
    if any(item.get_closest_marker("gpu") for item in items) and not cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (none on this machine)")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def pinned_to_cpu(request, monkeypatch):
    """Tests mean the CPU unless marked `gpu` or `any_device` (those mean this machine's default).

    The GPUs are hidden from every process a test starts (CUDA_VISIBLE_DEVICES="", as a user
    would), and from torch in this process too: its CUDA runtime read that variable when it first
    started and will not read it again, so here torch.cuda is told to answer "no GPU"."""
    if request.node.get_closest_marker("gpu") or request.node.get_closest_marker("any_device"):
        return
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        item.stash[FAILED] = True  # for stops_what_it_started's teardown
    return report


@pytest.fixture(autouse=True)
def stops_what_it_started(isolated, monkeypatch, request):
    """Every process a test starts carries its mark (support/strays.py); after a failed or slow test,
    whatever of them still runs (a detached trainer a timeout never reached) is ended, and said."""
    import uuid

    from support import strays

    mark = uuid.uuid4().hex
    monkeypatch.setenv(strays.MARK, mark)
    yield
    if request.node.stash.get(FAILED, False) or request.node.get_closest_marker("slow"):
        stopped = strays.stop_started(mark, isolated)
        if stopped:
            print(f"stopped what the test left running: pids {stopped}", file=sys.stderr)


@pytest.fixture
def runs_dir(isolated) -> Path:
    return isolated / "runs"


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run `amptui ARGS` in this process: the CLI's `main(argv)` with its output captured, answered
    like a finished subprocess (returncode, stdout, stderr). An argparse refusal's SystemExit is its
    exit code. No torch import per call, so refusals and table output stay in the fast lane."""
    from amptui.cli.main import main

    def run(*args: str, env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
        capsys.readouterr()
        with monkeypatch.context() as patch:
            for key, value in (env or {}).items():
                patch.setenv(key, value)
            try:
                code = main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        out, err = capsys.readouterr()
        proc = subprocess.CompletedProcess(["amptui", *args], code, stdout=out, stderr=err)
        if check and code != 0:
            raise AssertionError(f"amptui {' '.join(args)} exited {code}\n{out}\n{err}")
        return proc

    return run

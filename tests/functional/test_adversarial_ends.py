"""How runs end when they do not end politely (issue 32, findings 4-10): a stop nobody answers, a
full disk, a config.toml that is not a file, a live run whose lock and run.json are gone, a script's
exit code, a huge keymap binding. Real processes and files; each test under a timeout."""

from __future__ import annotations

import json
import time

import pytest

# --- finding 9: the keymap check is linear ----------------------------------------------------------------

@pytest.mark.timeout(120)  # quadratic, 20,000 keys took 81 s and 200,000 never finished
@pytest.mark.parametrize("first,says", [("f1", "'f1' is also app.help's key on the home screen"), ("x0", "")])
def test_a_binding_of_200000_keys_is_checked_and_its_clash_named(isolated, cli, first, says):
    from amptui.core import userconfig

    keys = ",".join([first] + [f"x{i}" for i in range(1, 200_000)])
    path = userconfig.config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[keymap]\n"home.run" = "{keys}"\n')
    proc = cli("keys", "--format", "json")
    if says:
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr[:300]
    else:
        assert proc.returncode == 0, proc.stderr[:300]
        actions = {a["action"]: a["keys"] for a in json.loads(proc.stdout)["actions"]}
        assert actions["home.run"] == keys


# --- finding 10 (b): a killed DDP rank is named with its signal -----------------------------------------

def _failure(tmp_path, rank: int, exitcode: int, message: str | None, t: float):
    """torchrun's record of one failed rank: with the error file `@record` writes (`message`), or
    none (a rank killed by a signal writes nothing)."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    error_file = tmp_path / f"error{rank}.json"
    if message is not None:
        error_file.write_text(json.dumps({"message": {"message": message, "extraInfo": {
            "py_callstack": "Traceback ...", "timestamp": str(int(t)), "amptui_time": t}}}))
    return ProcessFailure(local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file=str(error_file))


@pytest.mark.parametrize("signum", [9, 11])
def test_a_rank_killed_by_a_signal_is_named_not_the_survivors_connection_error(tmp_path, signum):
    import signal

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from amptui.trainer.torchrun import first_failure

    survivor = _failure(tmp_path, 0, 1, "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection reset by peer",
                        time.time() - 1)  # recorded, and even before torchrun saw the killed rank
    killed = _failure(tmp_path, 1, -signum, None, time.time())
    rank, error = first_failure(ChildFailedError("train", {0: survivor, 1: killed}))
    name = signal.Signals(signum).name
    assert rank == 1 and error["rank"] == 1 and error["message"] == f"rank 1 was killed ({name})", error


def test_a_rank_that_raised_is_still_named_with_its_exception_and_torchruns_sigterm_is_no_cause(tmp_path):
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from amptui.trainer.torchrun import first_failure

    raised = _failure(tmp_path, 1, 1, "RuntimeError: injected failure at step 3 on rank 1", time.time())
    stopped = _failure(tmp_path, 0, -15, None, time.time())  # the survivor torchrun stopped
    rank, error = first_failure(ChildFailedError("train", {0: stopped, 1: raised}))
    assert rank == 1 and error["type"] == "RuntimeError" and "injected failure" in error["message"]

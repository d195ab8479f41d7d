"""Bad input: one clear line naming the file, key or line; non-zero exit; no traceback; nothing
left on disk. Each case goes through the command line's entry point, `main(argv)`, in this process
(the `cli` fixture); one refusal per command goes through a real `python -m amptui` (slow)."""

import os

import pytest
from support.paths import FIXTURES


def assert_clean_refusal(proc, runs_dir, *words):
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("amptui: error: "), proc.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not runs_dir.exists() or not any(runs_dir.iterdir()), "a refused run must leave nothing behind"


def test_malformed_toml_names_the_file_and_line(cli, runs_dir):
    proc = cli("run", str(FIXTURES / "presets" / "bad_syntax.toml"))
    assert_clean_refusal(proc, runs_dir, "bad_syntax.toml", "line 3")


def test_unknown_key_in_a_preset_is_refused(cli, runs_dir):
    proc = cli("run", str(FIXTURES / "presets" / "unknown_key.toml"))
    assert_clean_refusal(proc, runs_dir, "unknown_key.toml", "amp.autocastt")


def test_bad_set_names_its_key(cli, runs_dir):
    assert_clean_refusal(cli("run", "quickstart", "--set", "amp.dtype=float8"), runs_dir, "amp.dtype")
    assert_clean_refusal(cli("run", "quickstart", "--set", "data.batch_size=big"), runs_dir, "data.batch_size")
    assert_clean_refusal(cli("run", "quickstart", "--set", "amp.bogus=1"), runs_dir, "amp.bogus")


def test_unknown_preset(cli, runs_dir):
    assert_clean_refusal(cli("run", "no-such-preset"), runs_dir, "no-such-preset", "quickstart")


def test_missing_cifar10_is_explained(cli, runs_dir, isolated):
    proc = cli("run", "alexnet-cifar10", "--set", "data.download=false", "--set", "data.root=nowhere")
    assert_clean_refusal(proc, runs_dir, "CIFAR-10 not found", "nowhere/cifar-10-batches-py", "data.name=synthetic")
    assert not (isolated / "nowhere").exists()


def test_failed_cifar10_download_is_explained_and_leaves_nothing(cli, runs_dir, isolated):
    # No network here (nor in CI): the real download is tried and fails.
    proc = cli("run", "alexnet-cifar10", "--set", "data.root=cifar")
    assert_clean_refusal(proc, runs_dir, "CIFAR-10 not found", "download failed", "data.name=synthetic")
    assert not (isolated / "cifar").exists()


def test_missing_image_folder_is_explained(cli, runs_dir):
    proc = cli("run", "resnet18-intel", "--set", "model.pretrained=false", "--set", "data.root=intel")
    assert_clean_refusal(proc, runs_dir, "intel/seg_train", "data.name=synthetic")


def test_missing_pretrained_weights_are_explained(cli, runs_dir, isolated, monkeypatch):
    (isolated / "intel" / "seg_train" / "a").mkdir(parents=True)
    (isolated / "intel" / "seg_test" / "a").mkdir(parents=True)
    proc = cli("run", "resnet18-intel", "--set", "data.root=intel", "--set", "model.num_classes=1",
                  env={"TORCH_HOME": str(isolated / "torch-home")})
    assert_clean_refusal(proc, runs_dir, "ImageNet weights for resnet18", "torch-home", "model.pretrained=false")


def test_cuda_on_a_machine_without_one_is_refused(cli, runs_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert_clean_refusal(cli("run", "quickstart", "--set", "run.device=cuda"), runs_dir, "run.device", "cpu")


def test_accumulation_longer_than_an_epoch_is_refused_up_front(cli, runs_dir):
    proc = cli("run", "quickstart", "--set", "amp.accumulate=1000")
    assert_clean_refusal(proc, runs_dir, "amp.accumulate (1000)", "64 batches")


def test_dataparallel_needs_two_gpus(cli, runs_dir):
    assert_clean_refusal(cli("run", "quickstart", "--set", "dist.mode=dp"), runs_dir, "at least 2 GPUs")


@pytest.mark.parametrize("command", ["stop", "resume"])
@pytest.mark.parametrize("run_id", ["../etc", "/etc/passwd", "no-such-run"])
def test_bad_run_ids(cli, command, run_id, runs_dir):
    proc = cli(command, run_id)
    assert_clean_refusal(proc, runs_dir)
    assert run_id in proc.stderr or repr(run_id) in proc.stderr


def test_help_lists_the_commands(cli):
    proc = cli("--help", check=True)
    for command in ("run", "stop", "resume", "runs", "presets"):
        assert command in proc.stdout


RUNS_DIR_COMMANDS = [("run", "quickstart"), ("ab", "quickstart"), ("runs",), ("resume", "some-run"),
                     ("stop", "some-run"), ("compare", "some-run"), ("watch", "some-run")]


@pytest.mark.parametrize("command", RUNS_DIR_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("how", ["option", "env"])
def test_a_file_as_the_runs_folder_is_one_clear_line(cli, command, how, isolated):
    not_a_folder = isolated / "notes.md"
    not_a_folder.write_text("a file, not a folder\n")
    if how == "option":
        proc = cli(*command, "--runs-dir", str(not_a_folder))
    else:
        proc = cli(*command, env={"AMPTUI_RUNS_DIR": str(not_a_folder)})
    assert_clean_refusal(proc, isolated / "runs", "notes.md", "not a folder",
                         "--runs-dir" if how == "option" else "AMPTUI_RUNS_DIR")
    assert not_a_folder.read_text() == "a file, not a folder\n"
    assert "no runs" not in proc.stdout


@pytest.mark.parametrize("command", [("run", "quickstart"), ("ab", "quickstart")], ids=lambda c: c[0])
def test_a_runs_folder_that_cannot_be_created_is_refused_before_anything_starts(cli, command, isolated):
    (isolated / "notes.md").write_text("")
    proc = cli(*command, "--runs-dir", str(isolated / "notes.md" / "runs"))
    assert_clean_refusal(proc, isolated / "runs", "cannot be created", "notes.md is a file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere, so no folder is unwritable")
def test_an_unwritable_runs_folder_is_refused(cli, isolated):
    locked = isolated / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        proc = cli("run", "quickstart", "--runs-dir", str(locked / "runs"))
        assert_clean_refusal(proc, locked / "runs", "permission denied")
    finally:
        locked.chmod(0o700)

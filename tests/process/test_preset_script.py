"""A preset is amptui's trainer's config: one naming `run.script` (a file or `-m MODULE`) would have
its model, data and precision keys silently ignored, so it is refused wherever a preset is read
(run, presets show, ab, slurm, the lists) and never saved, in one line naming the file and key."""


import pytest
from support.cli import amptui, one_clear_line

from amptui.core.config import presets

SCRIPT_PRESET = '[run]\nscript = "train.py"\nepochs = 3\n[amp]\ndtype = "float16"\n'
MODULE_PRESET = '[run]\nscript = "-m pkg.train"\n'


def saved(name: str, text: str):
    folder = presets.saved_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(text)
    return folder / f"{name}.toml"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_amptui_run_of_a_preset_naming_a_script_is_one_line_exit_2_and_nothing_written(isolated):
    (isolated / "s.toml").write_text(SCRIPT_PRESET)
    (isolated / "train.py").write_text("print('ran')\n")  # there to run: the preset is refused, not the file
    saved("scripted", MODULE_PRESET)
    before = sorted(p.relative_to(isolated) for p in isolated.rglob("*"))
    line = one_clear_line(amptui("run", "s.toml", "--detach", timeout=90))
    assert line == ("amptui: error: s.toml: run.script = 'train.py': a preset names no script: the script's own "
                    "loop decides its model, data and precision, so the preset's other keys would be ignored; "
                    "remove run.script, or run the script as `amptui run --script train.py` (a script run takes "
                    "run.name, run.description, log.every, log.tensorboard, log.mlflow, numerics.every, numerics.depth, "
                    "run.apply_amp, amp.autopilot, dist.*)"), line
    line = one_clear_line(amptui("run", "scripted", timeout=90))
    assert "scripted.toml: run.script = '-m pkg.train'" in line and "`amptui run -m pkg.train`" in line
    assert sorted(p.relative_to(isolated) for p in isolated.rglob("*")) == before

"""The one writer of files other systems parse (jobs/clusterfile.py): a shared preset, a --set
value, a script's name or arguments holding a character YAML, a shell or a terminal takes as a line
break (U+2028, U+2029, U+0085, "\\r", ...) never changes what a SkyPilot task or a SLURM script
runs: the task parses (as SkyPilot parses it, PyYAML) to exactly the intended setup/run/envs and
its embedded preset to exactly the preset's values; what cannot go into a shell word is refused in
one line; `presets show` prints such a character as its escape."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.cli import one_clear_line

from amptui.core.config import values as cfgmod
from amptui.core.errors import UserError
from amptui.jobs import sky

yaml = pytest.importorskip("yaml")  # SkyPilot reads tasks with PyYAML

BREAKERS = "\u2028\u2029\u0085\r\x0b\x0c\x1c\x1d\x1e\x1b\u202e\u00a0\t"
ATTACK = "a lab preset\u2028setup: touch /tmp/amptui-pwned\u2028run: touch /tmp/amptui-pwned"
SOURCE = sky.InstallSource("amptui{extras}==1.0", None, "amptui 1.0 from the package index, as here")


def crafted_preset(tmp_path: Path) -> Path:
    path = tmp_path / "shared.toml"
    values = {"run": {"name": "lab\u2028# injected", "description": ATTACK, "max_steps": 4},
              "data": {"root": "/data\u0085setup: evil"}}
    path.write_text(cfgmod.to_toml(values).replace("\\u2028", "\u2028").replace("\\u0085", "\u0085"))
    assert "\u2028" in path.read_text()  # as a hostile preset holds it: raw, which TOML allows in strings
    return path


def embedded_preset(run: str) -> dict:
    match = re.search(r"<<'AMPTUI_PRESET'\n(.*?)\nAMPTUI_PRESET\n", run, re.S)
    assert match, run
    return cfgmod.parse_toml(match.group(1), "the embedded preset")


def test_a_shared_preset_with_line_separators_gives_exactly_the_intended_sky_task(cli, tmp_path):
    out = cli("sky", str(crafted_preset(tmp_path)), "--nodes", "2", "--gpus", "H100:8", "--runs-dir", "/mnt/runs",
              "--set", 'run.seed=3', "--set", 'data.augment=false', check=True).stdout
    assert all(line.isprintable() for line in out.split("\n"))  # no reader finds a line break but "\n"
    task = yaml.safe_load(out)
    assert set(task) == {"name", "num_nodes", "resources", "envs", "setup", "run"}
    assert "touch" not in task["setup"] and "touch" not in task["name"]
    assert task["envs"] == {"AMPTUI_RUNS_DIR": "/mnt/runs", "RDZV_PORT": "29500"}
    preset = embedded_preset(task["run"])
    assert preset["run"]["description"] == ATTACK and preset["run"]["name"] == "lab\u2028# injected"
    assert preset["data"]["root"] == "/data\u0085setup: evil"
    assert task["run"].count("touch") == 2 and all("touch" not in line for line in task["run"].split("\n")
                                                   if not line.startswith("description = "))


def test_a_set_value_with_u0085_stays_inside_the_embedded_preset(cli):
    out = cli("sky", "quickstart", "--nodes", "2", "--gpus", "cpu", "--runs-dir", "/mnt/runs",
              "--set", 'run.description="x\u0085setup: touch /tmp/p"', check=True).stdout
    task = yaml.safe_load(out)
    assert embedded_preset(task["run"])["run"]["description"] == "x\u0085setup: touch /tmp/p"
    assert "touch" not in task["setup"]


@pytest.mark.parametrize("bad", ["--\u2028setup: x", "a\rb", "\x85", "tab\there"])
def test_a_script_argument_or_name_a_reader_breaks_is_refused_in_one_line(cli, tmp_path, bad):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    line = one_clear_line(cli("sky", "--script", str(script), "--nodes", "2", "--gpus", "cpu",
                              "--runs-dir", "/mnt/runs", "--", "--lr", bad))
    assert "a script argument" in line and "U+" in line
    odd = tmp_path / "train\r.py"
    odd.write_text("print('hi')\n")
    line = one_clear_line(cli("sky", "--script", str(odd), "--nodes", "2", "--gpus", "cpu", "--runs-dir", "/mnt/runs"))
    assert "--script" in line and "U+000D" in line


def test_the_slurm_script_keeps_the_preset_inside_and_its_lines_whole(cli, tmp_path):
    out = cli("slurm", str(crafted_preset(tmp_path)), "--nodes", "2", "--gpus-per-node", "0", check=True).stdout
    assert all(line.isprintable() for line in out.split("\n"))
    preset = embedded_preset(out)
    assert preset["run"]["description"] == ATTACK and preset["data"]["root"] == "/data\u0085setup: evil"
    assert [line for line in out.split("\n") if "touch" in line] == [f"description = {json.dumps(ATTACK)}"]
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n"], input=out, text=True, capture_output=True, timeout=30).returncode == 0


def test_presets_show_prints_a_line_separator_as_its_escape_not_a_space(cli, tmp_path):
    out = cli("presets", "show", str(crafted_preset(tmp_path)), check=True).stdout
    assert "\\u2028setup: touch" in out and "\u2028" not in out and "\u0085" not in out


# --- the property: any string in any field ---------------------------------------------------------

TEXT = st.text(alphabet=st.one_of(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                                  st.sampled_from(BREAKERS)), max_size=24)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=TEXT, description=TEXT, root=TEXT, runs_dir=TEXT, script=TEXT, args=st.lists(TEXT, max_size=3))
@example(name="", description="", root="data", runs_dir="r", script="s", args=[])  # data.root's default
def test_any_string_in_any_field_is_refused_or_parses_to_exactly_the_intended_task(name, description, root,
                                                                                   runs_dir, script, args):
    values = {"run": {"name": name, "description": description}, "data": {"root": root}}
    try:
        cfg = cfgmod.build_config({}, {"run.name": name, "run.description": description, "data.root": root,
                                       "dist.mode": "ddp", "dist.nnodes": 2})
        spec = sky.SkySpec(nodes=2, runs_dir="/mnt/" + runs_dir, script=(script or "x") + ".py",
                           workdir=Path("/w"), script_args=args)
        doc = sky.task(cfg, spec, SOURCE)
        text = sky.task_yaml(doc, [f"amptui: {name}", "written by: " + shlex.join(args)])
    except UserError as exc:
        assert "\n" not in str(exc)
        refused = [v for v in ("/mnt/" + runs_dir, (script or "x") + ".py", *args) if not v.isprintable()]
        assert refused, f"refused though every shell word is printable: {exc}"
        return
    task = yaml.safe_load(text)
    assert set(task) == {"name", "workdir", "num_nodes", "envs", "setup", "run"}
    assert task["envs"] == {"AMPTUI_RUNS_DIR": "/mnt/" + runs_dir, "RDZV_PORT": "29500"}
    assert task["setup"] == sky.setup_section(SOURCE, cfg)
    assert task["run"] == doc["run"]
    preset, defaults = embedded_preset(task["run"]), cfgmod.build_config({}, {}).to_dict()
    for section, keys in values.items():
        for key, value in keys.items():  # a value equal to the default is left out of the preset
            assert preset.get(section, {}).get(key, defaults[section][key]) == value
    [worker] = [line for line in task["run"].split("\n") if "amptui.trainer.scriptrun" in line]
    words = shlex.split(worker.split("amptui.trainer.scriptrun", 1)[1].split(" 2>&1")[0])
    assert words == ["$RUN_DIR", (script or "x") + ".py", *args]


# --- the setup section: amptui's install source is a field too ----------------------------------------

def pip_words(setup: str, home: Path) -> list[str]:
    """What bash hands pip when it runs `setup` (python3 stood in for by a function that prints its words)."""
    shim = 'python3() { printf "%s\\0" "$@"; }\n'
    done = subprocess.run(["bash", "-c", shim + setup], capture_output=True, timeout=30, env={"HOME": str(home)})
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]


@pytest.mark.skipif(not shutil.which("bash"), reason="runs the setup section with bash")
@pytest.mark.parametrize("url", ["https://h/x$(touch {marker})", "https://h/x`touch {marker}`",
                                 "https://h/x\"'$HOME"])
def test_an_install_source_with_shell_syntax_reaches_pip_as_one_word_and_runs_nothing(tmp_path, url):
    marker = tmp_path / "pwned"
    url = url.format(marker=marker)
    source = sky.InstallSource(f"amptui{{extras}} @ git+{url}@abc", None, f"from {url} at commit abc, as here")
    cfg = cfgmod.build_config({}, {"dist.mode": "ddp", "dist.nnodes": 2})
    setup = sky.setup_section(source, cfg)
    assert len(setup.rstrip("\n").split("\n")) == 3  # set, one comment, pip: no line a URL added
    assert pip_words(setup, tmp_path)[3:] == [f"amptui @ git+{url}@abc"] and not marker.exists()


@pytest.mark.parametrize("odd", ["\ntouch /tmp/pwned", "\u2028touch /tmp/pwned"])
def test_an_install_source_with_a_line_break_is_refused_in_one_line(odd):
    source = sky.InstallSource(f"amptui{{extras}} @ git+https://h/x{odd}@abc", None, f"from https://h/x{odd}, as here")
    with pytest.raises(UserError) as refused:
        sky.setup_section(source, cfgmod.build_config({}, {"dist.mode": "ddp", "dist.nnodes": 2}))
    assert "\n" not in str(refused.value) and "install source" in str(refused.value)


@pytest.mark.skipif(not shutil.which("bash"), reason="runs the setup section with bash")
def test_an_uploaded_checkout_is_installed_from_the_nodes_home(tmp_path):
    source = sky.InstallSource("$HOME/amptui-src{extras}", Path("/w/amptui"), "from the checkout /w/amptui (uploaded), as here")
    cfg = cfgmod.build_config({}, {"dist.mode": "ddp", "dist.nnodes": 2, "log.tensorboard": True})
    assert pip_words(sky.setup_section(source, cfg), tmp_path) == ["-m", "pip", "install",
                                                                   f"{tmp_path}/amptui-src[tensorboard]"]


@pytest.mark.parametrize("option", ["--partition", "--time"])
def test_an_sbatch_option_with_an_unprintable_character_is_refused_naming_the_option(cli, tmp_path, option):
    line = one_clear_line(cli("slurm", "quickstart", "--nodes", "2", "--gpus-per-node", "0",
                              "--runs-dir", str(tmp_path), option, "gpu\u202e\x1b[2J"))
    assert option in line and "\x1b" not in line and "\u202e" not in line

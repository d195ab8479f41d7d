"""The layers hold: core (no torch, Textual or trainer at import time) < telemetry < trainer and
the Monitor; the dashboard sees core only. `lint-imports` checks the contracts in pyproject.toml
(it sees imports inside functions too, so core's lazy torch imports are named there); the tests
below check what a real interpreter loads."""

from __future__ import annotations

from pathlib import Path

from amptui.core.errors import UserError
from amptui.core.run import checkpoints


def test_the_weights_table_names_torchvision_files():
    """core/prepare/pretrained.py (no torch) holds the file names torchvision's weights download to."""
    from torchvision import models

    from amptui.core.prepare.pretrained import WEIGHTS, torchvision_weights

    for name, entry in WEIGHTS.items():
        assert Path(torchvision_weights(models, name).url).name == entry.file


# --- checkpoints/last.json: a resume check without torch ------------------------------------------

def _checkpoint(directory: Path, config: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    pt = directory / "last.pt"
    pt.write_bytes(b"tensors")
    checkpoints.write_info(directory, checkpoints.describe(
        {"progress": {"step": 7, "epoch": 1}, "config": config, "code": "x"}, pt))
    return pt


def test_last_json_describes_its_checkpoint_until_the_checkpoint_changes(tmp_path):
    config = {"model": {"name": "smallcnn"}, "optim": {"name": "sgd", "lr": 0.1}}
    pt = _checkpoint(tmp_path, config)
    info = checkpoints.read_info(tmp_path)
    assert info is not None and (info["step"], info["epoch"], info["config"]) == (7, 1, config)
    checkpoints.check_config_fits("r", info["config"], {**config, "optim": {"name": "sgd", "lr": 0.2}})
    try:
        checkpoints.check_config_fits("r", info["config"], {**config, "model": {"name": "mlp"}})
    except UserError as exc:
        assert "model.name 'smallcnn' -> 'mlp'" in str(exc)
    else:
        raise AssertionError("a structural change must be refused")
    pt.write_bytes(b"other tensors")  # damaged, copied or rewritten: only last.pt itself can tell now
    assert checkpoints.read_info(tmp_path) is None
    assert "describes another last.pt" in checkpoints.stale_reason(tmp_path)
    (tmp_path / "last.json").unlink()
    assert checkpoints.read_info(tmp_path) is None and "no last.json" in checkpoints.stale_reason(tmp_path)

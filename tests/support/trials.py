"""The failed canned run copied under another run name, resumable (`trial_copy`)."""

from __future__ import annotations


def trial_copy(root, run_id: str, name: str):
    """The failed canned run, with a checkpoint (so resumable), under another run name."""
    import shutil

    from support.dashboard import FAILED

    folder = shutil.copytree(root / FAILED, root / run_id)
    for file in ("config.toml", "events.jsonl"):
        path = folder / file
        path.write_text(path.read_text().replace('name = "quickstart"', f'name = "{name}"')
                        .replace('"name":"quickstart"', f'"name":"{name}"')
                        .replace('"preset":"quickstart"', f'"preset":"{name}"'))
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "last.pt").write_bytes(b"x")
    return folder

"""Nothing amptui starts imports amptui from the working folder: `python -m amptui...` puts that
folder first on the import path, so an `amptui/` there (a checkout, or code planted in a shared
folder) ran instead, as the user. The user's own code there still works: a preset's
model.factory is imported from the working folder, a script's own folder is on its path.
(`amptui serve`'s tabs: tests/process/test_serve.py.)"""

from __future__ import annotations

import os

from amptui.jobs.spawn import forget_working_folder


def test_pythonpath_keeps_the_folders_it_names_and_loses_the_working_folder(isolated, monkeypatch):
    monkeypatch.chdir(isolated)
    env = {"PYTHONPATH": os.pathsep.join(["", "/x", ".", "examples", str(isolated), "/x"])}
    forget_working_folder(env)
    assert env["PYTHONPATH"] == os.pathsep.join(["/x", str(isolated / "examples")])
    env = {"PYTHONPATH": os.pathsep}
    forget_working_folder(env)
    assert env == {}

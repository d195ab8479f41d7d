"""The README as a newcomer meets it: what amptui is, the two commands, a picture and the complete
keys before anything else; the release notes in CHANGELOG.md; code trust after Install. And the
dashboard's key docs name every key of the home screen."""

from __future__ import annotations

import re

from support.paths import REPO

README = (REPO / "README.md").read_text()


def test_the_readme_opens_with_what_it_is_the_two_commands_a_picture_and_the_keys():
    sections = re.split(r"^## ", README, flags=re.M)
    opening = sections[0]
    paragraph, rest = opening.split("```bash", 1)
    assert "amptui is a terminal dashboard for PyTorch automatic mixed precision" in paragraph
    assert rest.count("```bash") == 1 and "pip install -e . && amptui" in rest and "python -m pytest" in rest
    assert rest.index("pytest") < rest.index("![")  # then a picture
    assert sections[1].startswith("Keys\n")
    assert "What changed in this release" not in README and "[CHANGELOG.md](CHANGELOG.md)" in README
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(r"^## \d+\.\d+\.\d+ \(\d{4}-\d\d-\d\d\)$", changelog, re.M)
    assert README.index("## Install") < README.index("## Presets and run folders can be code")


def test_the_key_tables_name_every_home_key():
    from amptui.dashboard.screens.home.screen import HomeScreen

    keys = {b.key for b in HomeScreen.BINDINGS if len(b.key) == 1}
    readme_home = " ".join(line for line in README.splitlines() if line.startswith(("| home", "| any")))
    docs = (REPO / "docs" / "dashboard.md").read_text()
    home = docs[docs.index("## Home"):docs.index("## Run screen")]
    assert {k for k in keys if f"`{k}`" not in readme_home} == set()
    first_cells = " ".join(line.split("|")[1] for line in home.splitlines() if line.startswith("|"))
    assert {k for k in keys if f"`{k}`" not in first_cells} == set()

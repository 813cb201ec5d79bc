"""The README is a front door into docs/: every relative link of the README and of docs/*.md
reaches a file of the repository, and a link to a section (`file.md#anchor`) reaches a heading
of that file, so moving a section cannot leave a reader at a dead end."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target); the text may hold backticks and colons, not brackets
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def anchors(document: Path) -> set[str]:
    """The anchors GitHub gives a file's headings: lower case, punctuation but `-` and `_`
    dropped, each space a `-` (repeated headings are not numbered here: none is linked)."""
    text = FENCE.sub("", document.read_text())
    return {
        re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in text.splitlines()
        if line.startswith("#")
    }


def links(document: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", document.read_text()))


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_relative_link_resolves(document: Path) -> None:
    broken = []
    for target in links(document):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not this test's to check offline
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT)}")
        elif anchor and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert broken == [], f"{document.relative_to(ROOT)}: {broken}"


def test_the_readme_stays_a_front_door() -> None:
    """At most 150 lines, the two commands as CI runs them, and a way into every doc."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "python3 dev.py run" in readme and "python3 dev.py test" in readme
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(ROOT / "README.md")}
    assert set(DOCUMENTS[1:]) <= linked, "a doc in docs/ the README does not link to"

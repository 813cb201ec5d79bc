"""docs/protocol.md is the project's own contract: the repository points at it and at
nothing outside itself, and every reference to one of its sections names a section it has."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "docs" / "protocol.md"
# `docs/protocol.md: Waiting poll` (a comma or parenthesis ends the section's name)
REFERENCE = re.compile(r"docs/protocol\.md[:,] ([A-Z][\w -]*(?:\([\w_]+\))?)")
OUTSIDE = re.compile(r"\.\./shared|SPEC\.md|shared/seed|\bSPEC\b")


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [
        ROOT / name
        for name in listed
        if (ROOT / name).is_file()
        and (ROOT / name).suffix not in {".png", ".json"}
        and name != "tests/docs/test_protocol_doc.py"
    ]


def sections() -> set[str]:
    return {
        line.lstrip("#").strip()
        for line in PROTOCOL.read_text().splitlines()
        if line.startswith("#")
    }


def test_nothing_in_the_repository_points_outside_it() -> None:
    pointing = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in tracked_text_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert pointing == []


def test_every_reference_names_a_section_of_the_protocol() -> None:
    known = sections()
    references = 0
    for path in tracked_text_files():
        # a reference wrapped over lines of a comment reads as one line
        text = re.sub(r"\s*\n\s*(?:#|//)?\s*", " ", path.read_text(errors="replace"))
        for name in REFERENCE.findall(text):
            references += 1
            assert name.strip() in known, f"{path.relative_to(ROOT)}: no section {name!r}"
    assert references >= 20  # the code's comments point there


def test_readme_points_at_the_protocol() -> None:
    assert "docs/protocol.md" in (ROOT / "README.md").read_text()

"""docs/clients.md's worked example (A worked example) stays true: devtools/worked_example.py
walks the same path against a stack of real processes, and the document must show what the run
shows: the same requests, in the same order, with the same answer statuses, wait causes, order
statuses and need_request. Ids, tags, ETags, intervals and the emulator's documents change from
run to run and are not compared; every body the document shows must still be JSON.

A run on a busy machine may differ by timing alone: a woken poll that looks again before the
emulator's second write of a change (the order's list tag, after its part tags) answers the
parts' news first and the new status a poll later, and a poll whose pub/sub subscription is
slow answers at once without waiting. So the walk is made up to three times on one stack (each
with a new order), and one run must show what the document shows."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from devtools.worked_example import own_stack, walk
from devtools.worked_example_markdown import render, skeleton

ROOT = Path(__file__).resolve().parents[2]
BEGINS = "<!-- worked example: python -m devtools.worked_example -->"
ENDS = "<!-- end of the worked example -->"


def documented() -> str:
    text = (ROOT / "docs" / "clients.md").read_text()
    assert BEGINS in text and ENDS in text, "docs/clients.md has lost the worked example's marks"
    return text.split(BEGINS, 1)[1].split(ENDS, 1)[0]


def bodies(markdown: str) -> list[str]:
    """Every JSON body of the example's http blocks: a block's text after its head (a request
    line and headers, or a status line and headers), and each one-line exchange's JSON."""
    found = []
    for block in re.findall(r"```http\n(.*?)```", markdown, re.DOTALL):
        one_line = block.startswith(("POST ", "GET ")) and "\n\n" not in block
        if one_line or block.startswith("→"):
            for line in block.splitlines():
                head = re.match(r"(?:POST \S+|→ \d{3}) ?", line)
                assert head, f"not an exchange: {line!r}"
                if line[head.end() :]:
                    found.append(line[head.end() :])
        elif "\n\n" in block:
            found.append(block.split("\n\n", 1)[1])
    return found


def test_every_body_shown_is_json() -> None:
    shown = bodies(documented())
    assert len(shown) > 20
    for body in shown:
        json.loads(body)


def test_the_document_shows_what_a_run_shows() -> None:
    expected = skeleton(documented())

    async def runs() -> list[str]:
        shown = []
        async with own_stack() as urls:
            for _ in range(3):
                shown.append(render(await walk(urls)))
                if skeleton(shown[-1]) == expected:
                    break
        return shown

    shown = asyncio.run(runs())
    assert skeleton(shown[-1]) == expected, "\n\n".join(shown)

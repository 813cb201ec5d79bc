"""README's "Try it" walkthrough, run as written against a stack of real processes (`mlutp
run` on free ports): the only change made to it is the three base URLs, from the default
ports to the test stack's. So the section cannot rot: a command that stops working as pasted
fails here."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stack_process import StackProcess

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = {
    "launch": "http://127.0.0.1:8101",
    "orders_state": "http://127.0.0.1:8102",
    "emulator": "http://127.0.0.1:8110",
}


def first_block(document: str, heading: str) -> str:
    """The first sh block under `heading` (its `#` marks included) of a Markdown file."""
    text = (ROOT / document).read_text()
    marks = heading.split(" ", 1)[0]
    # the section ends at the next heading of its level or above, short of a title: a line
    # `# ...` inside an sh block is a shell comment, and the title is the document's first line
    section = text.split(f"\n{heading}\n", 1)[1]
    section = re.split(rf"\n#{{2,{len(marks)}}} ", section, maxsplit=1)[0]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match, f"{document}'s {heading!r} section has no sh block"
    return match.group(1)


def walkthrough() -> str:
    return first_block("README.md", "## Try it")


@pytest.fixture
def stack() -> Iterator[StackProcess]:
    # a stack per test: the walkthrough's user is always the same, and starts with no order
    with StackProcess() as running:
        yield running


def test_the_walkthrough_runs_as_pasted(stack: StackProcess):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed: the walkthrough's commands use it")
    script = walkthrough()
    for name, default in DEFAULTS.items():
        assert default in script, f"the walkthrough no longer names {default}"
        script = script.replace(default, stack.url(name))
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    # launch: the user's new order, actual, its parts to fetch
    [launched] = json.loads(next(line for line in lines if line.startswith("[")))
    assert launched["update_status"] == "actual" and "fast_info" in launched["need_request"]
    # the first poll: 200, fast_info not needed (its tag is current), the untagged parts are
    assert any(line.startswith("HTTP/1.1 200") for line in lines)
    polled = json.loads(next(line for line in lines if line.startswith('{"orders"')))
    [order] = polled["orders"]
    assert "fast_info" not in order["need_request"] and "rarely_changed" in order["need_request"]
    # the order moved on, and the last poll says so
    assert "driving" in lines
    last = json.loads(lines[-1])
    assert (last["orderid"], last["status"]) == (launched["orderid"], "driving")


def test_the_poll_and_part_examples_run_after_the_walkthrough(stack: StackProcess):
    """docs/operating.md's poll and part examples go on from the README walkthrough's variables:
    each answers 200 about the user's own order (no placeholder left in them, no other user's
    order)."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed: the examples use it")
    examples = first_block("docs/operating.md", "### The poll") + first_block(
        "docs/operating.md", "### Part endpoints"
    )
    script = walkthrough() + "echo ----\n" + examples
    for name, default in DEFAULTS.items():
        script = script.replace(default, stack.url(name))
    assert "…" not in examples
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    after = done.stdout.split("----\n", 1)[1]
    assert after.count("HTTP/1.1 200") == 2, after
    lines = [line for line in after.splitlines() if line.startswith("{")]
    launch, poll, part, route = (json.loads(line) for line in lines)
    [launched] = launch["mlutp_orders_state"]["orders"]
    assert launched["status"] == "driving"
    assert poll["orders"][0]["orderid"] == launched["orderid"]
    [fetched] = part["orders"]
    assert fetched["orderid"] == launched["orderid"] and "error" not in fetched
    assert route["orderid"] == launched["orderid"] and "error" not in route

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


def walkthrough() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Try it\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match, "README's Try it section has no sh block"
    return match.group(1)


@pytest.fixture(scope="module")
def stack() -> Iterator[StackProcess]:
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

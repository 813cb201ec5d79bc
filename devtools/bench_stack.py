"""Start a real stack for benchmarks: embedded Redis, order_tags and the emulator as
processes on free loopback ports, pinned to a CPU so the service under test has its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from shared.embedded_redis import EmbeddedRedis, free_port

TOKEN = "bench-token"


def wait_http(url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except urllib.error.HTTPError:
            return  # it answers: it is up
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def post_json(url: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    # the services answer a body not sent as application/json with a 415
    headers = {"Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    with urllib.request.urlopen(request, timeout=5) as response:
        data: bytes = response.read()
        return data


@dataclass
class Stack:
    redis: EmbeddedRedis
    env: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def order_tags_url(self) -> str:
        return self.env["ORDER_TAGS_URL"]

    @property
    def emulator_url(self) -> str:
        return self.env["EMULATOR_URL"]

    def start(self, module_or_code: list[str], cpu: int, url: str | None = None) -> None:
        process = subprocess.Popen(
            ["taskset", "-c", str(cpu), sys.executable, *module_or_code], env=self.env
        )
        self.processes.append(process)
        if url:
            wait_http(url)


@contextmanager
def upstream_stack(cpu: int = 1) -> Iterator[Stack]:
    redis = EmbeddedRedis()
    redis.start()
    tags_port, emulator_port = free_port(), free_port()
    env = dict(
        os.environ,
        MLUTP_SERVICE_TOKEN=TOKEN,
        REDIS_URL=redis.url,
        LOG_LEVEL="WARNING",
        ORDER_TAGS_PORT=str(tags_port),
        ORDER_TAGS_URL=f"http://127.0.0.1:{tags_port}",
        EMULATOR_PORT=str(emulator_port),
        EMULATOR_URL=f"http://127.0.0.1:{emulator_port}",
    )
    stack = Stack(redis, env)
    try:
        stack.start(["-m", "services.order_tags"], cpu, f"{stack.order_tags_url}/ping")
        stack.start(["-m", "emulator"], cpu, f"{stack.emulator_url}/ping")
        yield stack
    finally:
        for process in reversed(stack.processes):
            process.terminate()
            process.wait(10)
        redis.close()

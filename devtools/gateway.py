"""Bytes through a real HTTP/2 gateway (docs/protocol.md: For app developers, gzip behind a
gateway): Debian's nginx with gzip and h2c (HTTP/2 on a cleartext listener) in front of the
services, an HTTP/1.1 listener of the same nginx beside it, and a TCP proxy in front of each
listener that counts the payload crossing it both ways, every header and frame included
(devtools/counting_proxy.py).

Exchanges are replayed through it by Debian's h2load (nghttp2-client), one connection at a
time, as recorded from the reference clients (devtools/exchange_recording.py: the request's
headers and body as the client sent them). An exchange's cost is the marginal one on a
connection already open, as an app's long-lived connection carries it: (bytes of 1 + n
exchanges - bytes of 1) / n, so the connection's preface, settings and first header table
entries are not counted in it, and HPACK's indexing of the headers a connection sent before
is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from devtools.counting_proxy import Counted, CountingProxy
from devtools.exchange_recording import GZIP_LEVEL, Recorded
from shared.embedded_redis import free_port

# the gateway's gzip, as client.wire_bytes models it: from 20 bytes on (at the recorder's
# level), JSON among the types (nginx gzips text/html always)
GZIP_MIN_LENGTH = 20
# the first bytes an h2c client sends (RFC 9113, 3.4) and the frame type of a server's first
# frame (SETTINGS)
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS_FRAME = 0x4


def nginx_binary() -> str | None:
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")


def h2load_binary() -> str | None:
    return shutil.which("h2load")


def missing_tools() -> list[str]:
    """The Debian packages a gateway measurement needs and this machine lacks."""
    missing = []
    if nginx_binary() is None:
        missing.append("nginx")
    if h2load_binary() is None:
        missing.append("nghttp2-client")
    return missing


def nginx_config(
    prefix: Path, routes: Mapping[str, str], h2_port: int, h1_port: int, timeout_s: float = 60
) -> str:
    """nginx in front of `routes` (an exact path → the origin serving it): an h2c listener and
    an HTTP/1.1 one, the same gzip behind both."""
    locations = "\n".join(
        f"    location = {path} {{ proxy_pass {origin.rstrip('/')}; }}"
        for path, origin in sorted(routes.items())
    )

    def server(port: int, http2: str) -> str:
        return f"  server {{\n    listen 127.0.0.1:{port}{http2};\n{locations}\n  }}\n"

    temp = "\n".join(
        f"  {kind}_temp_path {prefix / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        "worker_processes 1;\n"
        f"pid {prefix / 'nginx.pid'};\n"
        f"error_log {prefix / 'error.log'} warn;\n"
        "events { worker_connections 512; }\n"
        "http {\n"
        # each answer's status, by the listener's port: what a replay was answered
        "  log_format status '$server_port $status';\n"
        f"  access_log {prefix / 'access.log'} status;\n"
        f"{temp}\n"
        # a gateway says its own name, not its version
        "  server_tokens off;\n"
        f"  gzip on;\n  gzip_comp_level {GZIP_LEVEL};\n  gzip_min_length {GZIP_MIN_LENGTH};\n"
        "  gzip_types application/json;\n"
        "  proxy_http_version 1.1;\n"
        '  proxy_set_header Connection "";\n'
        f"  proxy_read_timeout {int(timeout_s)}s;\n"
        "  keepalive_timeout 120s;\n"
        "  http2_idle_timeout 120s;\n"
        "  client_body_buffer_size 64k;\n" + server(h2_port, " http2") + server(h1_port, "") + "}\n"
    )


@dataclass
class Gateway:
    """A running nginx (h2c and HTTP/1.1 listeners), each behind its counting proxy."""

    h2: CountingProxy
    h1: CountingProxy
    config: str
    access_log: Path
    _seen: int = field(default=0, init=False)

    def proxy(self, http2: bool) -> CountingProxy:
        return self.h2 if http2 else self.h1

    def statuses(self) -> list[int]:
        """The statuses nginx answered since the last call (either listener)."""
        lines = self.access_log.read_text().splitlines() if self.access_log.exists() else []
        seen, self._seen = self._seen, len(lines)
        return [int(line.split()[1]) for line in lines[seen:]]


async def _wait_for_port(port: int, process: asyncio.subprocess.Process, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if process.returncode is not None:
            raise RuntimeError("nginx exited at start")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise RuntimeError(f"nginx did not listen on {port} within {timeout_s} s")


@contextlib.asynccontextmanager
async def running_gateway(routes: Mapping[str, str]) -> AsyncIterator[Gateway]:
    """nginx in the foreground in front of `routes` until the block ends."""
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError("nginx is not installed (Debian's nginx package)")
    with tempfile.TemporaryDirectory(prefix="mlutp-nginx-") as folder:
        prefix = Path(folder)
        # nginx's workers run as another user when it is started by root
        os.chmod(folder, 0o755)
        h2_port, h1_port = free_port(), free_port()
        config = nginx_config(prefix, routes, h2_port, h1_port)
        (prefix / "nginx.conf").write_text(config)
        process = await asyncio.create_subprocess_exec(
            binary,
            "-p",
            str(prefix),
            "-e",
            str(prefix / "error.log"),
            "-c",
            str(prefix / "nginx.conf"),
            "-g",
            "daemon off;",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        h2, h1 = CountingProxy(h2_port), CountingProxy(h1_port)
        try:
            try:
                await _wait_for_port(h1_port, process, 10)
                await _wait_for_port(h2_port, process, 10)
            except RuntimeError as exc:
                said = b""
                if process.returncode is not None and process.stderr is not None:
                    said = await process.stderr.read()
                log = (prefix / "error.log").read_text() if (prefix / "error.log").exists() else ""
                raise RuntimeError(f"{exc}: {said.decode()}{log}\n{config}") from None
            await h2.start()
            await h1.start()
            yield Gateway(h2, h1, config, prefix / "access.log")
        finally:
            await h2.close()
            await h1.close()
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 10)
                except TimeoutError:
                    process.kill()
                    await process.wait()


@dataclass(frozen=True)
class ExchangeBytes:
    """TCP payload of one exchange on an open connection, each way."""

    up: float
    down: float

    @property
    def both(self) -> float:
        return self.up + self.down


@dataclass(frozen=True)
class Replayed:
    """An exchange replayed through one listener: its marginal cost, the first exchange of
    a connection (preface and settings included), and how the connection began."""

    exchange: ExchangeBytes
    first: ExchangeBytes
    first_up: bytes
    first_down: bytes
    # every status nginx answered the replays with
    statuses: tuple[int, ...]


H2LOAD_DONE = re.compile(rb"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded")


async def h2load(
    gateway: Gateway, recorded: Recorded, count: int, *, http2: bool, timeout_s: float = 120
) -> Counted:
    """`count` copies of the recorded request, one after another on one connection, through
    the gateway's listener; what crossed its proxy."""
    binary = h2load_binary()
    if binary is None:
        raise RuntimeError("h2load is not installed (Debian's nghttp2-client package)")
    proxy = gateway.proxy(http2)
    proxy.reset()
    with tempfile.NamedTemporaryFile(prefix="mlutp-h2load-", suffix=".body") as body:
        body.write(recorded.body)
        body.flush()
        args = [binary, "-n", str(count), "-c", "1", "-m", "1", "-t", "1"]
        if not http2:
            args.append("--h1")
        if recorded.body or recorded.method == "POST":
            args += ["-d", body.name]
        for name, value in recorded.headers:
            args += ["-H", f"{name.lower()}: {value}"]
        args.append(f"http://127.0.0.1:{proxy.port}{recorded.path}")
        process = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        said, _ = await asyncio.wait_for(process.communicate(), timeout_s)
    done = H2LOAD_DONE.search(said)
    if process.returncode != 0 or done is None or int(done.group(3)) != count:
        raise RuntimeError(f"h2load did not get {count} answers: {said.decode(errors='replace')}")
    # the proxy may still be relaying the connection's last bytes
    return await proxy.settled()


async def replay(gateway: Gateway, recorded: Recorded, *, http2: bool, more: int) -> Replayed:
    """The recorded exchange's marginal cost through one listener: one connection carrying
    it once, another carrying it 1 + `more` times."""
    gateway.statuses()
    once = await h2load(gateway, recorded, 1, http2=http2)
    many = await h2load(gateway, recorded, 1 + more, http2=http2)
    return Replayed(
        exchange=ExchangeBytes((many.up - once.up) / more, (many.down - once.down) / more),
        first=ExchangeBytes(once.up, once.down),
        first_up=once.first_up[0] if once.first_up else b"",
        first_down=once.first_down[0] if once.first_down else b"",
        statuses=tuple(gateway.statuses()),
    )


def negotiated_h2(replayed: Replayed) -> bool:
    """The connection spoke HTTP/2: the client sent the h2c preface and the server's first
    frame was its SETTINGS (an HTTP/1.1 server answers text, or closes)."""
    down = replayed.first_down
    return (
        replayed.first_up.startswith(H2_PREFACE)
        and len(down) >= 9
        and down[3] == H2_SETTINGS_FRAME
        and not down.startswith(b"HTTP/")
    )


async def direct_status(session: aiohttp.ClientSession, recorded: Recorded) -> tuple[int, bytes]:
    """The recorded request sent again straight to its service: what it answers now."""
    async with session.request(
        recorded.method, recorded.url, data=recorded.body, headers=dict(recorded.headers)
    ) as response:
        return response.status, await response.read()

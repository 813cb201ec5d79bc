"""The shipped balancer (deploy/haproxy/haproxy.cfg, compose.yaml's "scale" profile) in front
of local replicas: the same file with only what names Docker changed (its DNS resolver and
server templates become the replicas' loopback ports, each frontend binds a port of the
caller's), run as a real haproxy process. Used by the tests and benchmarks of routing by user."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from devtools.stack import wait_for_ping

HAPROXY_CFG = Path(__file__).resolve().parents[1] / "deploy" / "haproxy" / "haproxy.cfg"
# what a backend's balance line brings with it: replaced with it by an override
BALANCE_DIRECTIVES = ("balance", "hash-type", "hash-balance-factor")
# words of default-server that only mean something with Docker's DNS
DOCKER_ONLY = ("resolvers", "init-addr")
# the shipped maxconn needs twice as many file descriptors as a test machine may give (a
# container's hard limit is often 20000): a local run needs far fewer connections
LOCAL_MAXCONN = 4000


def local_config(
    backends: Mapping[str, Sequence[str]],
    frontends: Mapping[str, int],
    *,
    balance: Mapping[str, str] | None = None,
    text: str | None = None,
) -> str:
    """The shipped config for replicas on this machine. `backends`: backend name → the URLs
    of its replicas (`http://127.0.0.1:port`); `frontends`: frontend name → the port it binds
    on the loopback; sections of neither are left out. `balance`: backend name → a balance
    line of its own instead of the shipped one (e.g. "roundrobin", to compare)."""
    balance = balance or {}
    out: list[str] = []
    section = ""
    keep = True
    for raw in (text if text is not None else HAPROXY_CFG.read_text()).splitlines():
        if raw and not raw[0].isspace() and not raw.startswith("#"):
            section = raw.strip()
            kind, _, name = section.partition(" ")
            if kind == "resolvers":
                keep = False
            elif kind == "frontend":
                keep = name in frontends
            elif kind == "backend":
                keep = name in backends
            else:
                keep = True
            if keep:
                out.append(raw)
            continue
        if not keep:
            continue
        words = raw.split("#", 1)[0].split()
        kind, _, name = section.partition(" ")
        indent = raw[: len(raw) - len(raw.lstrip())]
        if not words:
            out.append(raw)
        elif kind == "global" and words[0] == "maxconn":
            out.append(f"{indent}maxconn {LOCAL_MAXCONN}")
        elif kind == "frontend" and words[0] == "bind":
            out.append(f"{indent}bind 127.0.0.1:{frontends[name]}")
        elif kind == "backend" and words[0] == "server-template":
            for index, url in enumerate(backends[name], start=1):
                address = url.split("://", 1)[-1].rstrip("/")
                out.append(f"{indent}server {words[1]}{index} {address}")
        elif kind == "backend" and words[0] == "default-server":
            kept: list[str] = []
            skip = 0
            for word in words:
                if skip:
                    skip -= 1
                elif word in DOCKER_ONLY:
                    skip = 1
                else:
                    kept.append(word)
            out.append(indent + " ".join(kept))
        elif kind == "backend" and name in balance and words[0] in BALANCE_DIRECTIVES:
            if words[0] == "balance":
                out.append(f"{indent}balance {balance[name]}")
        else:
            out.append(raw)
    return "\n".join(out) + "\n"


def haproxy_binary() -> str | None:
    return shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")


@contextlib.asynccontextmanager
async def running_haproxy(
    config: str, ping_urls: Sequence[str], ready_timeout_s: float = 20.0
) -> AsyncIterator[asyncio.subprocess.Process]:
    """haproxy in the foreground on `config` until the block ends; ready once `/ping` answers
    through each of `ping_urls` (its frontends)."""
    binary = haproxy_binary()
    if binary is None:
        raise RuntimeError("haproxy is not installed (Debian's haproxy package)")
    with tempfile.TemporaryDirectory(prefix="mlutp-haproxy-") as folder:
        path = Path(folder) / "haproxy.cfg"
        path.write_text(config)
        checked = await asyncio.create_subprocess_exec(
            binary,
            "-c",
            "-q",
            "-f",
            str(path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        said, _ = await checked.communicate()
        if checked.returncode != 0:
            raise RuntimeError(f"haproxy refused the config: {said.decode()}\n{config}")
        process = await asyncio.create_subprocess_exec(
            binary,
            "-db",
            "-f",
            str(path),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            for url in ping_urls:
                await wait_for_ping(url, process, ready_timeout_s)
            yield process
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), 10)
                except TimeoutError:
                    process.kill()
                    await process.wait()

"""A lossy network link on one machine, for fault tests and benchmarks: a network namespace
joined to this one by a veth pair, with an nftables rule inside the namespace that drops a
random share of the packets to and from one TCP port (the kernel here has no netem, and a
rule inside the namespace leaves every other connection of the machine alone).

Needs root, `ip` (iproute2) and `nft` (nftables). `lossy_link_unavailable()` says in plain
words why a machine cannot make one. Deleting the namespace on exit takes the veth pair and
the rules with it, so nothing is left behind, however the caller ends.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

TABLE = "mlutp_loss"
# the /30 networks the link takes its two addresses from: private, and chosen at random
# among many, so runs side by side (CI and a developer's) do not collide
_NETWORKS = ipaddress.ip_network("10.200.0.0/13")


class LossyLinkUnavailable(RuntimeError):
    """This machine cannot make a lossy link (the message says why)."""


def lossy_link_unavailable() -> str | None:
    """Why a lossy link cannot be made here, in plain words; None when it can (as far as
    can be seen without trying)."""
    if os.geteuid() != 0:
        return "creating a network namespace needs root"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH (Debian's {package})"
    return None


def _run(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise LossyLinkUnavailable(f"`{' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


def _free_network() -> ipaddress.IPv4Network:
    """A /30 no route of this namespace covers."""
    routes = json.loads(_run("ip", "-json", "-4", "route", "show", "table", "all") or "[]")
    taken = []
    for route in routes:
        with contextlib.suppress(ValueError):
            taken.append(ipaddress.ip_network(route.get("dst", ""), strict=False))
    subnets = 2 ** (30 - _NETWORKS.prefixlen)
    for _ in range(100):
        index = random.randrange(subnets)
        candidate = ipaddress.IPv4Network((int(_NETWORKS.network_address) + 4 * index, 30))
        if not any(candidate.overlaps(net) for net in taken if net.prefixlen > 0):
            return candidate
    raise LossyLinkUnavailable("no free /30 in 10.200.0.0/13 for the link")


@dataclass(frozen=True)
class LossyLink:
    namespace: str
    # this namespace's end of the veth pair, and the other namespace's
    host_ip: str
    inner_ip: str

    @property
    def exec_prefix(self) -> tuple[str, ...]:
        """Runs a command inside the namespace (it execs it: pid and signals are its own)."""
        return ("ip", "netns", "exec", self.namespace)

    def drop(self, port: int, one_in: int | None) -> None:
        """Drop one packet in `one_in`, at random, of those the namespace receives on `port`
        and sends from it (both directions of every connection to a server there); None:
        drop nothing. Replaces the previous rule."""
        in_rule = out_rule = ""
        if one_in is not None:
            # counts what the rule saw, then what it dropped: the loss really made
            sample = f"counter numgen random mod {one_in} 0 counter drop;"
            in_rule, out_rule = f"tcp dport {port} {sample}", f"tcp sport {port} {sample}"
        # declared, deleted and made anew in one transaction: the previous rule goes
        ruleset = (
            f"table inet {TABLE}\ndelete table inet {TABLE}\n"
            f"table inet {TABLE} {{\n"
            f"  chain input {{ type filter hook input priority 0; policy accept; {in_rule} }}\n"
            f"  chain output {{ type filter hook output priority 0; policy accept; {out_rule} }}\n"
            "}\n"
        )
        _run(*self.exec_prefix, "nft", "-f", "-", stdin=ruleset)

    def dropped(self) -> tuple[int, int]:
        """Packets the rules saw and dropped since the last `drop`."""
        listing = json.loads(_run(*self.exec_prefix, "nft", "-j", "list", "table", "inet", TABLE))
        seen = lost = 0
        for item in listing.get("nftables", []):
            rule = item.get("rule")
            if rule is None:
                continue
            counters = [e["counter"]["packets"] for e in rule["expr"] if "counter" in e]
            if len(counters) == 2:
                seen += counters[0]
                lost += counters[1]
        return seen, lost


@contextlib.contextmanager
def lossy_link() -> Iterator[LossyLink]:
    """A namespace joined to this one by a veth pair (no loss until `drop` says so); gone on
    exit. Raises LossyLinkUnavailable, saying why, where the machine cannot make one."""
    why = lossy_link_unavailable()
    if why is not None:
        raise LossyLinkUnavailable(why)
    token = secrets.token_hex(4)
    namespace = f"mlutp-loss-{token}"
    # interface names have at most 15 characters
    host_end, inner_end = f"mlh{token}", f"mln{token}"
    _run("ip", "netns", "add", namespace)
    try:
        network = _free_network()
        host_ip, inner_ip = (str(address) for address in network.hosts())
        _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", inner_end)
        try:
            _run("ip", "link", "set", inner_end, "netns", namespace)
        except LossyLinkUnavailable:
            # still in this namespace: deleting the namespace would not take it
            _run("ip", "link", "del", host_end)
            raise
        _run("ip", "addr", "add", f"{host_ip}/30", "dev", host_end)
        _run("ip", "link", "set", host_end, "up")
        _run("ip", "-n", namespace, "addr", "add", f"{inner_ip}/30", "dev", inner_end)
        _run("ip", "-n", namespace, "link", "set", inner_end, "up")
        _run("ip", "-n", namespace, "link", "set", "lo", "up")
        link = LossyLink(namespace, host_ip, inner_ip)
        link.drop(0, None)
        yield link
    finally:
        # the veth pair (both ends) and the nftables table go with the namespace
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=10)

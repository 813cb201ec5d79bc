"""What the client holds of its orders, as it sends it and as it keeps it.

- Known orders: each order it shows, in order, with its parts' tags, its echo fields (so a
  stale order keeps them), and `force` while a user change is unseen.
- Its state between app starts (the design's stage 3: the app caches its orders' state): its
  orders with their parts' tags and fields, and the policy versions it holds. A restarted app
  shows them at once and launches with them, so launch revalidates the tags and nothing
  unchanged is fetched again. A file here; `localStorage` in the JS client."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from client.model import MAX_ECHO_BYTES, MAX_ECHO_FIELDS, Order, Part

log = logging.getLogger("mlutp.client")

VERSION = 1


# a known order's own keys: never sent as echo fields
KNOWN_ORDER_KEYS = frozenset({"orderid", "service", "status", "tags", "force"})


def echo_fields(brief: dict[str, Any]) -> dict[str, Any]:
    """An order's brief fields as its known order sends them back (echo fields): returned as
    sent if the order comes back stale, so a stale order keeps them. Within the server's
    bounds (16 fields, 2 KiB together), the first ones first."""
    echo: dict[str, Any] = {}
    size = 2  # the braces
    for name, value in brief.items():
        if name in KNOWN_ORDER_KEYS or len(echo) >= MAX_ECHO_FIELDS:
            continue
        item = len(json.dumps({name: value}, separators=(",", ":"))) - 1
        if size + item > MAX_ECHO_BYTES:
            continue
        echo[name] = value
        size += item
    return echo


def known_orders(orders: list[Order]) -> list[dict[str, Any]]:
    known = []
    for order in orders:
        entry: dict[str, Any] = {
            **echo_fields(order.brief),
            "orderid": order.orderid,
            "service": order.service,
            "status": order.status,
            "tags": {name: p.tag for name, p in order.parts.items() if p.tag},
        }
        if order.locked:
            entry["force"] = True
        known.append(entry)
    return known


def save_state(path: Path | None, orders: list[Order], policy_versions: dict[str, str]) -> None:
    """Written whole, then moved into place: a crash mid-write leaves the last state. No
    path: the client keeps nothing."""
    if path is None:
        return
    state = {
        "version": VERSION,
        "policy_versions": policy_versions,
        "orders": [
            {
                "orderid": order.orderid,
                "service": order.service,
                "status": order.status,
                "brief": order.brief,
                "parts": {
                    name: {"tag": part.tag, "fields": part.fields}
                    for name, part in order.parts.items()
                    if part.arrived
                },
            }
            for order in orders
        ],
    }
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(state, separators=(",", ":")))
    os.replace(temporary, path)


def load_state(path: Path) -> tuple[list[Order], dict[str, str]]:
    """The orders and policy versions saved last; none when there is no state, or one this
    client cannot read (another version's, a damaged file): then the app starts afresh."""
    try:
        state: dict[str, Any] = json.loads(path.read_text())
        if state.get("version") != VERSION:
            return [], {}
        orders = []
        for saved in state["orders"]:
            order = Order(saved["orderid"], saved["service"], saved["status"])
            # shown from the cache until launch says more: a loader, not fresh data
            order.update_status = "stale"
            order.brief = dict(saved["brief"])
            for name, part in saved["parts"].items():
                order.parts[name] = Part(tag=part["tag"], fields=dict(part["fields"]), arrived=True)
            orders.append(order)
        return orders, {str(k): str(v) for k, v in state["policy_versions"].items()}
    except FileNotFoundError:
        return [], {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning(
            "the saved client state cannot be read: starting afresh", extra={"error": repr(exc)}
        )
        return [], {}

"""The worked example's record and its markdown (docs/clients.md: A worked example): each
step's exchanges as sent and answered (`Exchange`, `Step`), rendered with long documents
trimmed to the fields that matter (a `"…"` entry names what was left out), and the skeleton
of facts that do not change from run to run, which tests/docs/test_worked_example.py compares
with the document. devtools/worked_example.py makes the record from a real run."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# what a taxi app sends beside `orders` in every taxi part request (part_type totw): shown in
# full once, then named
TOTW_PARAMETERS: dict[str, Any] = {
    "extend_freecars": False,
    "format_currency": True,
    "supported": [],
    "position": {"point": [37.5881, 55.7341], "dx": 15},
}
# fast_info's fields the example shows in full; the others are named under "…"
FAST_INFO_SHOWN = ("orderid", "tag", "version", "status", "status_info", "driver", "eta")
WIDTH = 96
REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 404: "Not Found"}


@dataclass
class Exchange:
    method: str
    path: str
    body: Any
    status: int
    headers: dict[str, str]
    answer: Any
    request_headers: dict[str, str] = field(default_factory=dict)
    # seconds since the walk began: when it was sent, and how long its answer took
    sent_at: float = 0.0
    took: float = 0.0


@dataclass
class Step:
    """One numbered step of the example: what happens, its exchanges, and a word on them."""

    title: str
    exchanges: list[Exchange]
    note: str = ""
    # one line per exchange (the emulator's calls, parts fetched alike)
    compact: bool = False
    # an exchange made while the step's one poll was held
    during: Exchange | None = None


def _pretty(value: Any, indent: int = 0, column: int | None = None) -> str:
    """JSON, each value on one line where it fits in WIDTH (from `column`, where it starts),
    else spread over lines indented by two."""
    compact = json.dumps(value, ensure_ascii=False)
    starts = indent if column is None else column
    if starts + len(compact) <= WIDTH or not isinstance(value, dict | list) or not value:
        return compact
    pad = " " * (indent + 2)
    if isinstance(value, list):
        items = [pad + _pretty(item, indent + 2) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    lines = []
    for key, item in value.items():
        head = f"{pad}{json.dumps(key, ensure_ascii=False)}: "
        lines.append(head + _pretty(item, indent + 2, len(head)))
    return "{\n" + ",\n".join(lines) + "\n" + " " * indent + "}"


def _left_out(kept: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {**kept, "…": ", ".join(names)} if names else dict(kept)


def _trim_part(order: Mapping[str, Any], shown: Sequence[str]) -> dict[str, Any]:
    kept = {k: v for k, v in order.items() if k in shown}
    return _left_out(kept, [k for k in order if k not in shown])


def trimmed(exchange: Exchange, compact: bool) -> Any:
    """The answer with its long documents cut to the fields that matter."""
    answer = exchange.answer
    if not isinstance(answer, dict):
        return answer
    if exchange.path == "/4.0/launch":
        state = dict(answer["mlutp_orders_state"])
        state["polling_policy"] = [
            {**rule, "fields": [*rule["fields"][:2], f"… {len(rule['fields']) - 2} more"]}
            if len(rule["fields"]) > 3
            else rule
            for rule in state["polling_policy"]
        ]
        return {"mlutp_orders_state": state}
    if exchange.path.startswith("/mlutp/v1/taxi/"):
        shown = ("orderid", "tag") if compact else FAST_INFO_SHOWN
        return {**answer, "orders": [_trim_part(o, shown) for o in answer["orders"]]}
    if exchange.path.endswith("/advance"):
        return _trim_part(answer, ("status", "version", "tags"))
    if exchange.path == "/mlutp/v1/orders/state":
        # the capabilities were shown by launch; a poll's answer is about status and parts
        orders = [
            _trim_part(order, [k for k in order if k != "change_capabilities"])
            for order in answer["orders"]
        ]
        return {**answer, "orders": orders}
    return answer


def _request_lines(exchange: Exchange, sent_before: dict[str, int], step: int) -> list[str]:
    """`sent_before`: the known_orders shown so far → the step that showed them."""
    lines = [f"{exchange.method} {exchange.path}"]
    lines += [f"{name}: {value}" for name, value in exchange.request_headers.items()]
    body = exchange.body
    if isinstance(body, dict) and body.get("known_orders"):
        known = json.dumps(body["known_orders"])
        if known in sent_before:
            body = {**body, "known_orders": f"… as in step {sent_before[known]}"}
        else:
            sent_before[known] = step
    if body is not None:
        lines += ["", _pretty(body)]
    return lines


def _answer_lines(exchange: Exchange) -> list[str]:
    lines = [f"HTTP/1.1 {exchange.status} {REASONS.get(exchange.status, '')}".rstrip()]
    lines += [f"{name}: {value}" for name, value in exchange.headers.items()]
    if exchange.answer is not None:
        lines += ["", _pretty(trimmed(exchange, False))]
    return lines


def _one_line(exchange: Exchange) -> list[str]:
    sent = exchange.body
    if isinstance(sent, dict) and "orders" in sent and set(TOTW_PARAMETERS) <= set(sent):
        # a part request: its totw parameters are the ones shown in full before
        sent = {"orders": sent["orders"], "…": "the totw parameters, as above"}
    body = "" if sent is None else " " + json.dumps(sent, ensure_ascii=False)
    answer = json.dumps(trimmed(exchange, True), ensure_ascii=False)
    return [f"{exchange.method} {exchange.path}{body}", f"→ {exchange.status} {answer}"]


def _block(lines: Sequence[str]) -> list[str]:
    return ["```http", *lines, "```", ""]


def render(steps: Sequence[Step]) -> str:
    out: list[str] = []
    number = 0
    sent_before: dict[str, int] = {}
    for step in steps:
        if step.title:
            number += 1
            first = step.exchanges[0] if step.exchanges else step.during
            at = f" (t = {first.sent_at:.1f} s)" if first is not None else ""
            out += [f"**{number}. {step.title}**{at}", ""]
        if step.compact:
            out += _block([line for e in step.exchanges for line in _one_line(e)])
        else:
            for exchange in step.exchanges:
                out += _block(_request_lines(exchange, sent_before, number))
                if step.during is not None:
                    during = step.during
                    out += [
                        f"Held. {during.sent_at - exchange.sent_at:.1f} s later a driver is found:",
                        "",
                        *_block(_one_line(during)),
                        f"and the held poll answers ({exchange.took:.1f} s after it was sent):",
                        "",
                    ]
                out += _block(_answer_lines(exchange))
        if step.note:
            out += [textwrap.fill(step.note, WIDTH, break_on_hyphens=False), ""]
    return "\n".join(out).rstrip() + "\n"


# what a reader must see as it is: the path (order ids aside), the answer's status and wait
# cause, every order's status and need_request, where an answer_tag is sent or given; numbers,
# ids, tags and documents change per run
SKELETON = re.compile(
    r'^(?:POST|GET) \S+|^(?:HTTP/1\.1|→) \d{3}|^X-Mlutp-Wait: \w+|"answer_tag": "'
    r'|"(?:status|update_status)": "\w+"|"need_request": \[[^\]]*\]|"orders": \[\]',
    re.MULTILINE,
)


def skeleton(markdown: str) -> list[str]:
    """The example's facts that do not change from run to run, in order."""
    hex_ids = re.compile(r"[0-9a-f]{32}")
    return [hex_ids.sub("{id}", found) for found in SKELETON.findall(markdown)]

"""The documents of the simulated orders: what each part upstream cuts its part from, and the
stamp each fetch carries in every part: whom the upstream served it to and the document's
revision then (the `crossing` and `behind_tag` checks read it from each part answered)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

# where a part carries its fetch's stamp: a field of its rule that the documents hold nothing
# else in (fast_info and the place orders' full_info, rarely_changed, static, chat); the
# performer's part has one field only, and holds the stamp inside it
STAMP_FIELDS = ("updated_at", "promo", "share_text", "orderchat")
NESTED_STAMP = ("orderperformerinfo", "served")


@dataclass(frozen=True)
class Stamp:
    """Whom an upstream served a document to, and its revision (changes made) then."""

    user_id: str
    revision: int


def served(document: dict[str, Any], user_id: str, revision: int) -> dict[str, Any]:
    """The document as a part upstream serves it to `user_id`: each part stamped."""
    stamp = {"user": user_id, "revision": revision}
    out = {**document, **dict.fromkeys(STAMP_FIELDS, stamp)}
    outer, inner = NESTED_STAMP
    value = document.get(outer)
    if isinstance(value, dict):
        out[outer] = {**value, inner: stamp}
    return out


def stamps(part: dict[str, Any]) -> list[Stamp]:
    """The stamps a part answer carries (its fields as the server passes them: raw JSON)."""
    found: list[Any] = []
    for name in STAMP_FIELDS:
        if name in part:
            found.append(_decoded(part[name]))
    outer, inner = NESTED_STAMP
    if outer in part:
        value = _decoded(part[outer])
        if isinstance(value, dict):
            found.append(value.get(inner))
    return [
        Stamp(one["user"], one["revision"])
        for one in found
        if isinstance(one, dict) and "user" in one and "revision" in one
    ]


def _decoded(value: Any) -> Any:
    return msgspec.json.decode(value) if isinstance(value, msgspec.Raw) else value


def new_document(service: str, orderid: str, created_at: str, status: str) -> dict[str, Any]:
    """A small document with a field of every part: what each part upstream cuts from."""
    if service == "taxi":
        return {
            "version": 1,
            "status": status,
            "eta": None,
            "driver": {"name": f"driver of {orderid}"},
            "comment": "",
            "tips": 0,
            "destinations": [{"short_text": "Street 1"}],
            "route_sharing_url": f"https://taxi.example/{orderid}",
            "created_at": created_at,
            "chathistory": [],
            "orderperformerinfo": {"rating": 4.9},
        }
    return {
        "version": 1,
        "status": status,
        "eta": None,
        "place": {"name": f"place of {orderid}"},
        "items": [{"name": "item", "count": 1}],
        "total": 100,
    }

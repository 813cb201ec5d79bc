"""The documents of the simulated orders: what each part upstream cuts its part from."""

from __future__ import annotations

from typing import Any


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

"""Realistic upstream documents: the taxi totw (~44 top-level fields, 5–15 KB), eats and
grocery order details, and taxiroute answers. Deterministic per order, so tests can compare."""

from __future__ import annotations

import random
from typing import Any

from shared.protocol.allowed_changes import ChangeCapability

TAXI_STATUSES = ("searching", "driving", "waiting", "transporting", "complete")
EATS_STATUSES = ("created", "cooking", "delivering", "delivered")
GROCERY_STATUSES = ("created", "assembling", "delivering", "delivered")
LIFECYCLES: dict[str, tuple[str, ...]] = {
    "taxi": TAXI_STATUSES,
    "eats": EATS_STATUSES,
    "grocery": GROCERY_STATUSES,
}
SERVICES = tuple(LIFECYCLES)
# per service: the most active orders a user may have before `can_make_more_orders` is false
ORDER_LIMITS = {"taxi": 3, "eats": 2, "grocery": 2}
# a service of the policy file that is none of the above (one added by configuration alone) is
# served as a generic place service: grocery's lifecycle, rules and documents
GENERIC_SERVICE = "grocery"


def lifecycle(service: str) -> tuple[str, ...]:
    return LIFECYCLES.get(service, LIFECYCLES[GENERIC_SERVICE])


def order_limit(service: str) -> int:
    return ORDER_LIMITS.get(service, ORDER_LIMITS[GENERIC_SERVICE])


# fields of totw that no part of the policy carries: only old clients read them
TOTW_UNPARTED_FIELDS = (
    "typed_experiments", "notifications", "alert", "private_data", "order_actions", "ads",
    "safety_center",
)  # fmt: skip
# the services a taxi order's data lives in, each an upstream of its own (`/parts/<name>`,
# fault target `part:<name>`), by the fields each builds: the order core (the default policy's
# `fast_info`), the order's settings (`rarely_changed`), what never changes (`static`), the
# chat service (`chat`) and the performer info service (`slow`). Legacy totw assembles its
# document from the same services, and its own unparted fields
TAXI_PART_SERVICES: dict[str, tuple[str, ...]] = {
    "order_core": (
        "version", "status", "status_info", "driver", "vehicle", "eta", "cost",
        "cost_breakdown", "waiting", "ui_buttons", "cancel_rules", "feedback", "ride_progress",
        "updated_at",
    ),
    "order_settings": (
        "payment", "tariff", "comment", "requirements", "destinations", "source", "tips",
        "promo", "surge", "pickup_time", "corp", "change_permissions",
    ),
    "order_static": (
        "route_sharing_url", "currency_rules", "created_at", "country", "support_phone",
        "brand", "legal_entities", "share_text",
    ),
    "orderchat": ("orderchat", "chathistory"),
    "orderperformerinfo": ("orderperformerinfo",),
}  # fmt: skip
STATUS_TEXT = {
    "searching": "Looking for a car",
    "driving": "The driver is on the way",
    "waiting": "The driver is waiting for you",
    "transporting": "On the way",
    "complete": "You have arrived",
    "created": "Order accepted",
    "cooking": "Being prepared",
    "assembling": "Being assembled",
    "delivering": "The courier is on the way",
    "delivered": "Delivered",
}


def _rng(orderid: str, salt: str = "") -> random.Random:
    return random.Random(f"{orderid}:{salt}")


def _point(rng: random.Random) -> list[float]:
    return [round(37.4 + rng.random() * 0.4, 6), round(55.6 + rng.random() * 0.3, 6)]


# kind of change → the statuses it is allowed in, and the reason it is not in the others
CHANGE_RULES: dict[str, dict[str, tuple[frozenset[str], str]]] = {
    "taxi": {
        "cancel": (frozenset({"searching", "driving", "waiting"}), "trip_started"),
        "change_destination": (
            frozenset({"searching", "driving", "waiting", "transporting"}),
            "too_late",
        ),
        "add_tips": (frozenset({"driving", "waiting", "transporting"}), "no_performer"),
        "change_payment": (frozenset({"searching", "driving", "waiting"}), "too_late"),
        "comment": (frozenset({"searching", "driving", "waiting"}), "too_late"),
    },
    "eats": {
        "cancel": (frozenset({"created"}), "already_cooking"),
        "change_payment": (frozenset({"created"}), "too_late"),
        "comment": (frozenset({"created", "cooking"}), "too_late"),
    },
    "grocery": {
        "cancel": (frozenset({"created"}), "already_assembling"),
        "change_payment": (frozenset({"created"}), "too_late"),
        "comment": (frozenset({"created", "assembling"}), "too_late"),
    },
}


def change_capabilities(service: str, status: str) -> dict[str, ChangeCapability]:
    """What the user may change in an order of this status, as its source says."""
    return {
        kind: ChangeCapability(True) if status in allowed else ChangeCapability(False, reason)
        for kind, (allowed, reason) in CHANGE_RULES.get(
            service, CHANGE_RULES[GENERIC_SERVICE]
        ).items()
    }


def taxi_brief(doc: dict[str, Any]) -> dict[str, Any]:
    return {"short_address": doc["source"]["short_text"], "tariff_class": doc["tariff"]["class"]}


def place_brief(doc: dict[str, Any]) -> dict[str, Any]:
    return {"place_name": doc["place"]["name"], "items_count": len(doc["items"])}


def new_taxi_document(orderid: str, created_at: str) -> dict[str, Any]:
    rng = _rng(orderid)
    source, dest = _point(rng), _point(rng)
    currency = {"code": "RUB", "sign": "₽", "template": "$VALUE$ $SIGN$$CURRENCY$", "text": "rub"}
    return {
        "version": 1,
        "status": "searching",
        "status_info": {"text": STATUS_TEXT["searching"], "translations": {}},
        "driver": None,
        "vehicle": None,
        "eta": None,
        "cost": {"value": 350 + rng.randint(0, 500), "currency": "RUB", "fixed": True},
        "cost_breakdown": [
            {"kind": kind, "value": rng.randint(10, 300), "text": f"{kind} part of the fare"}
            for kind in ("base", "distance", "time", "waiting", "booking", "surge")
        ],
        "waiting": {"free_s": 180, "paid_s": 0, "price_per_min": 9},
        "ui_buttons": [{"id": "cancel", "title": "Cancel"}, {"id": "share", "title": "Share"}],
        "cancel_rules": {"free_until": created_at, "penalty": 0, "message": "Free to cancel"},
        "ride_progress": None,
        "updated_at": created_at,
        "payment": {"type": "card", "card_mask": f"****{rng.randint(1000, 9999)}", "tips_allowed": True},
        "tariff": {"class": rng.choice(["econom", "comfort", "business"]), "name": "Comfort"},
        "comment": "",
        "requirements": {"childchair": False, "conditioner": True, "animal_transport": False},
        "destinations": [{"point": dest, "short_text": f"Street {rng.randint(1, 99)}", "full_text": f"Moscow, Street {rng.randint(1, 99)}, {rng.randint(1, 40)}"}],
        "source": {"point": source, "short_text": f"Avenue {rng.randint(1, 99)}", "full_text": f"Moscow, Avenue {rng.randint(1, 99)}, {rng.randint(1, 40)}"},
        "tips": {"type": "percent", "value": 0},
        "promo": None,
        "surge": {"value": 1.0, "message": ""},
        "pickup_time": None,
        "corp": None,
        "change_permissions": {"destinations": True, "comment": True, "payment": True, "tips": True},
        "route_sharing_url": f"https://taxi.example/route-sharing/{orderid}",
        "currency_rules": currency,
        "created_at": created_at,
        "country": "rus",
        "support_phone": "+7 495 000-00-00",
        "brand": "yataxi",
        "legal_entities": [
            {"title": f"Carrier {i}", "ogrn": str(rng.randint(10**12, 10**13)), "address": "Moscow, Lva Tolstogo 16", "work_hours": "24/7"}
            for i in range(3)
        ],
        "share_text": "I am taking a taxi, follow my ride",
        "orderperformerinfo": None,
        "orderchat": {"enabled": False, "unread": 0},
        "chathistory": [],
        "typed_experiments": {
            f"exp_{i}": {"enabled": rng.random() < 0.5, "value": {"threshold": rng.randint(0, 1000), "text": "x" * 40}}
            for i in range(40)
        },
        "notifications": [{"id": f"n{i}", "text": "Buckle up, please " * 3} for i in range(5)],
        "alert": None,
        "private_data": {"phone_hash": f"{rng.getrandbits(128):032x}", "user_tags": ["a", "b", "c"]},
        "order_actions": [{"action": a, "enabled": True} for a in ("cancel", "change_payment", "change_destination", "call_driver", "share", "feedback")],
        "ads": {"banners": [{"id": f"b{i}", "image": f"https://img.example/{i}.png", "text": "Order food with free delivery " * 2} for i in range(6)]},
        "safety_center": {"enabled": True, "contacts": [], "texts": {"title": "Safety", "body": "Share your ride with loved ones. " * 5}},
    }  # fmt: skip


def taxi_status_fields(doc: dict[str, Any], status: str, orderid: str, now: str) -> dict[str, Any]:
    """The fields a status change sets (None = absent)."""
    rng = _rng(orderid, status)
    fields: dict[str, Any] = {
        "status": status,
        "status_info": {"text": STATUS_TEXT[status], "translations": {}},
        "updated_at": now,
    }
    if status == "driving":
        fields["driver"] = {
            "name": rng.choice(["Ivan", "Anna", "Oleg"]),
            "rating": "4.9",
            "phone": "+7 900 000-00-00",
        }
        fields["vehicle"] = {
            "model": "Skoda Octavia",
            "color": "white",
            "plates": f"A{rng.randint(100, 999)}AA77",
        }
        fields["eta"] = {"minutes": rng.randint(3, 9)}
        fields["orderperformerinfo"] = {
            "photo": "https://img.example/driver.png",
            "park": "Park 1",
            "experience_years": rng.randint(1, 20),
            "awards": ["polite", "clean car"],
        }
        fields["orderchat"] = {"enabled": True, "unread": 0}
    elif status == "waiting":
        fields["eta"] = {"minutes": 0}
        fields["waiting"] = {"free_s": 180, "paid_s": 0, "price_per_min": 9}
    elif status == "transporting":
        fields["eta"] = {"minutes": rng.randint(10, 30)}
        fields["ride_progress"] = {"percent": 0}
        fields["cancel_rules"] = None  # cannot cancel once in the car
    elif status == "complete":
        fields["eta"] = None
        fields["ride_progress"] = {"percent": 100}
        fields["feedback"] = {"allowed": True, "rating_options": [1, 2, 3, 4, 5]}
        fields["ui_buttons"] = [{"id": "feedback", "title": "Rate the ride"}]
    return fields  # fmt: skip


def new_place_document(service: str, orderid: str, created_at: str) -> dict[str, Any]:
    rng = _rng(orderid)
    return {
        "version": 1,
        "status": "created",
        "status_info": {"text": STATUS_TEXT["created"]},
        "place": {"name": rng.choice(["Burger Place", "Pho Bo", "Lavka"]) if service == "eats" else "Lavka", "address": "Moscow, Lva Tolstogo 16"},
        "courier": None,
        "items": [{"name": f"Item {i}", "quantity": rng.randint(1, 3), "price": rng.randint(100, 900)} for i in range(rng.randint(1, 6))],
        "eta": {"minutes": rng.randint(25, 60)},
        "total": {"value": rng.randint(500, 3000), "currency": "RUB"},
        "payment": {"type": "card"},
        "delivery_address": {"short_text": f"Street {rng.randint(1, 99)}", "point": _point(rng)},
        "cancel_rules": {"allowed": True},
        "feedback": None,
        "updated_at": created_at,
        "created_at": created_at,
    }  # fmt: skip


def place_status_fields(service: str, status: str, orderid: str, now: str) -> dict[str, Any]:
    rng = _rng(orderid, status)
    fields: dict[str, Any] = {
        "status": status,
        "status_info": {"text": STATUS_TEXT[status]},
        "updated_at": now,
    }
    if status in ("cooking", "assembling"):
        fields["eta"] = {"minutes": rng.randint(20, 40)}
    elif status == "delivering":
        fields["courier"] = {"name": rng.choice(["Pavel", "Olga"]), "phone": "+7 900 111-11-11"}
        fields["eta"] = {"minutes": rng.randint(5, 20)}
        fields["cancel_rules"] = None
    elif status == "delivered":
        fields["eta"] = None
        fields["feedback"] = {"allowed": True}
    return fields  # fmt: skip


def route_document(doc: dict[str, Any], driver_position: list[float], now: str) -> dict[str, Any]:
    source = doc["source"]["point"]
    dest = doc["destinations"][0]["point"]
    distance = abs(driver_position[0] - dest[0]) + abs(driver_position[1] - dest[1])
    return {
        "route": [source, driver_position, dest],
        "driver_position": driver_position,
        "distance_left_m": int(distance * 100_000),
        "time_left_s": int(distance * 10_000),
        "updated_at": now,
    }


def taxi_part_answer(service: str, document: dict[str, Any]) -> dict[str, Any]:
    """What one of TAXI_PART_SERVICES answers for an order: its own fields of the order's
    data (those absent now, absent), and the order id."""
    answer = {"orderid": document["orderid"]}
    for name in TAXI_PART_SERVICES[service]:
        if name in document:
            answer[name] = document[name]
    return answer


def totw_answer(document: dict[str, Any]) -> dict[str, Any]:
    """Legacy totw's document, assembled from every taxi part service's answer and the
    fields only totw answers."""
    answer: dict[str, Any] = {}
    for service in TAXI_PART_SERVICES:
        answer.update(taxi_part_answer(service, document))
    built = {"orderid", *answer}
    answer.update((name, value) for name, value in document.items() if name not in built)
    return answer


# every top-level field the documents may carry (optional ones included)
TOTW_FIELDS = frozenset(new_taxi_document("x", "x"))
PLACE_FIELDS = frozenset(new_place_document("eats", "x", "x"))

"""The worked example of docs/clients.md (A worked example), made from a real run: a taxi
order from launch to its end, every request and answer, printed as markdown.

    python -m devtools.worked_example             # on a stack of its own, on free ports
    python -m devtools.worked_example --stack http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8110

(`--stack`: the launch, orders_state and emulator URLs of a running stack.) It drives the
emulator by hand (its background driver off) and acts as an app would: launch, the parts the
answer names, a poll, one with nothing new (204), a waiting poll a change wakes, the parts that poll
named, the trip to its end, a poll, the user's rating, and a last poll that leaves the order
out. Between polls it waits the interval the last answer gave, and each poll sends back the
`answer_tag` of the last answer, as an app does. What it
records is rendered by devtools/worked_example_markdown.py: long documents are trimmed to the
fields that matter (a `"…"` entry names what was left out); nothing else is changed.
tests/docs/test_worked_example.py runs it and checks that the document still shows what it
prints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from devtools.stack import STACK, Stack, free_ports_env
from devtools.worked_example_markdown import TOTW_PARAMETERS, Exchange, Step, render

USER = "example-user"
WAIT_MS = 25_000
# the answer headers the example shows (the others are HTTP's own)
SHOWN_HEADERS = ("X-Yataxi-Polling-Interval-Ms", "X-Mlutp-Wait", "Retry-After")
# the stack's defaults but one: a woken poll looks again 0.2 s after its wake-up, so the one
# change of step 6 (the order's part tags, then its list tag) is one answer. Without it the
# poll may answer the parts' news a moment before the list's, and the next poll brings the
# new status
EXAMPLE_SETTINGS = {"orders_state": {"waiting": {"settle_s": 0.2}}}


@dataclass(frozen=True)
class Urls:
    launch: str
    orders_state: str
    emulator: str


class App:
    def __init__(self, session: aiohttp.ClientSession, urls: Urls) -> None:
        self.session = session
        self.urls = urls
        self.started = time.monotonic()

    async def post(
        self, base: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> Exchange:
        sent = dict(headers or {})
        sent_at = time.monotonic() - self.started
        async with self.session.post(
            f"{base}{path}",
            data=None if body is None else json.dumps(body),
            headers={**sent, "Content-Type": "application/json"},
        ) as response:
            raw = await response.read()
        return Exchange(
            "POST",
            path,
            body,
            response.status,
            {h: response.headers[h] for h in SHOWN_HEADERS if h in response.headers},
            json.loads(raw) if raw else None,
            sent,
            round(sent_at, 1),
            round(time.monotonic() - self.started - sent_at, 1),
        )


def as_user(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # the gateway's: the user it authenticated
    return {"X-Yandex-UID": USER, **(extra or {})}


def known_order(order: Mapping[str, Any], tags: Mapping[str, str]) -> dict[str, Any]:
    """What the app sends back of an order it shows: its status, every brief field the last
    answer had (echo fields, `created_at` among them) and the tags it holds."""
    answer_only = {"tags", "need_request", "update_status", "change_capabilities", "parts"}
    return {**{k: v for k, v in order.items() if k not in answer_only}, "tags": dict(tags)}


def interval_s(exchange: Exchange) -> float:
    # the header, never cached; without it, the fallback
    return int(exchange.headers.get("X-Yataxi-Polling-Interval-Ms", 2000)) / 1000


async def walk(urls: Urls) -> list[Step]:
    steps: list[Step] = []
    async with aiohttp.ClientSession() as session:
        app = App(session, urls)
        emulator, state_url = urls.emulator, urls.orders_state

        # the answer_tag of the last poll's answer: sent back, as an app does
        held: dict[str, str] = {}

        async def poll(body: dict[str, Any]) -> Exchange:
            sent = {**body, "answer_tag": held["tag"]} if held else body
            polled = await app.post(state_url, "/mlutp/v1/orders/state", sent, as_user())
            if polled.status == 200:
                held["tag"] = polled.answer["answer_tag"]
            return polled

        async def fetch(url: str, orderid: str, tag: str | None) -> tuple[Exchange, str]:
            order = {"orderid": orderid} if tag is None else {"orderid": orderid, "tag": tag}
            part = await app.post(state_url, url, {**TOTW_PARAMETERS, "orders": [order]}, as_user())
            return part, part.answer["orders"][0]["tag"]

        driver = await app.post(emulator, "/emulator/v1/driver", {"enabled": False})
        created = await app.post(
            emulator, "/emulator/v1/orders", {"user_id": USER, "service": "taxi"}
        )
        orderid = created.answer["orderid"]
        steps.append(
            Step(
                "The emulator: its background driver off, and a taxi order for the user",
                [driver, created],
                "The example stands in for the order call of the app and moves the order by hand.",
                compact=True,
            )
        )

        launched = await app.post(
            urls.launch, "/4.0/launch", {"supported_services": ["taxi"]}, as_user()
        )
        state = launched.answer["mlutp_orders_state"]
        [order] = state["orders"]
        versions = state["policy_versions"]
        urls_of = {rule["part_name"]: rule["url"] for rule in state["polling_policy"]}
        steps.append(
            Step(
                "Launch (no known orders: a first start)",
                [launched],
                "The new order needs every `tag_defined` part: the app holds no tag. Keep "
                "`policy_versions` and name it in every poll.",
            )
        )

        tags: dict[str, str] = {}
        fetched = []
        for part in order["need_request"]:  # by priority; an app may fetch them in parallel
            exchange, tags[part] = await fetch(urls_of[part], orderid, None)
            fetched.append(exchange)
        steps.append(
            Step(
                "The parts `need_request` named, `fast_info` (required) first",
                fetched[:1],
                "The view of the order is drawn once `fast_info` lands. The other parts, "
                "fetched alike, each answer their own fields and a tag:",
            )
        )
        steps.append(Step("", fetched[1:], compact=True))

        await asyncio.sleep(interval_s(launched))
        known = known_order(order, tags)
        asked = {"known_orders": [known], "supported_services": ["taxi"]}
        polled = await poll({**asked, "policy_versions": versions})
        steps.append(
            Step(
                "A poll at the interval launch gave",
                [polled],
                "Every tag is current: `need_request` is empty. Poll again after "
                "`X-Yataxi-Polling-Interval-Ms`, read anew from every answer.",
            )
        )

        await asyncio.sleep(interval_s(polled))
        revalidated = await poll({**asked, "policy_versions": versions})
        steps.append(
            Step(
                "The next poll, with the last answer's `answer_tag`",
                [revalidated],
                "Nothing changed: `204 No Content`, no body, and the answer you hold stands "
                "(a 2xx: every HTTP client's success check passes). The interval header is on "
                "the 204 too.",
            )
        )

        await asyncio.sleep(interval_s(revalidated))
        waiting = asyncio.ensure_future(
            poll({**asked, "wait_ms": WAIT_MS, "policy_versions": versions})
        )
        await asyncio.sleep(2.5)
        advanced = await app.post(emulator, f"/emulator/v1/orders/taxi/{orderid}/advance")
        woken = await waiting
        [order] = woken.answer["orders"]
        steps.append(
            Step(
                "A waiting poll: held until the order changes",
                [woken],
                "`wakeup`: the change woke the held poll, and it had news (a new status, parts "
                "to fetch; the emulator also bumped `main`, a part of the older taxi layout the "
                "policy file still serves). After `news`, `wakeup` or `timeout` a waiting app "
                "polls again at once; this one goes on with plain polls at the interval until "
                "its last.",
                during=advanced,
            )
        )

        again = []
        for part in order["need_request"]:
            exchange, tags[part] = await fetch(urls_of[part], orderid, tags[part])
            again.append(exchange)
        steps.append(
            Step(
                "The parts that poll named, each with the tag the app holds",
                again[:1],
                "A field of the part absent from the answer is deleted from the view. "
                "`chat` and `slow` alike:",
            )
        )
        steps.append(Step("", again[1:], compact=True))
        known = known_order(order, tags)
        asked = {"known_orders": [known], "supported_services": ["taxi"]}

        moved = [
            await app.post(emulator, f"/emulator/v1/orders/taxi/{orderid}/advance")
            for _ in range(3)
        ]
        steps.append(Step("The trip: the driver arrives, the ride, the end", moved, compact=True))

        # a plain poll at the interval; the min TTL (2 s) has passed for the new fast_info tag
        await asyncio.sleep(max(interval_s(woken), 2.1))
        ended = await poll({**asked, "policy_versions": versions})
        [order] = ended.answer["orders"]
        steps.append(
            Step(
                "A plain poll (no `wait_ms`) at the interval",
                [ended],
                "The trip is over; the order stays until the user rates it. (`complete` has no "
                "base interval in the policy: the default, 5000 ms.) The app fetches "
                "`fast_info` as in step 7 (the final cost, the rating screen):",
            )
        )
        exchange, tags["fast_info"] = await fetch(urls_of["fast_info"], orderid, tags["fast_info"])
        steps.append(Step("", [exchange], compact=True))
        known = known_order(order, tags)
        asked = {"known_orders": [known], "supported_services": ["taxi"]}

        rated = await app.post(
            emulator, f"/emulator/v1/features/taxi/{orderid}/feedback", {"rating": 5}, as_user()
        )
        steps.append(Step("The user rates the trip", [rated], compact=True))

        last = await poll({**asked, "wait_ms": WAIT_MS, "policy_versions": versions})
        steps.append(
            Step(
                "A waiting poll",
                [last],
                "The order left the source's list: it is left out, and that is news, answered "
                "at once. Drop it from the screen. No active orders: the interval is 30000 "
                "(± 10 %).",
            )
        )
    return steps


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--stack", help="launch,orders_state,emulator URLs of a running stack (default: its own)"
    )
    args = parser.parse_args(argv)
    steps = asyncio.run(run(args.stack))
    print(render(steps), end="")
    return 0


@contextlib.asynccontextmanager
async def own_stack() -> AsyncIterator[Urls]:
    """A stack of the example's own, on free ports, with its own Redis."""
    env = {**os.environ, **free_ports_env(), "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    env.pop("REDIS_CLUSTER_NODES", None)
    stack = Stack(env, [s for s in STACK if s.name != "demo"], settings=EXAMPLE_SETTINGS)
    try:
        await stack.start()
        yield Urls(stack.url("launch"), stack.url("orders_state"), stack.url("emulator"))
    finally:
        await stack.close()


async def run(stack_urls: str | None = None) -> list[Step]:
    """The walk against the stack at these URLs, or on a stack of its own."""
    if stack_urls:
        return await walk(Urls(*stack_urls.split(",")))
    async with own_stack() as urls:
        return await walk(urls)


if __name__ == "__main__":
    sys.exit(main())

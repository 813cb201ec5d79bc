"""The part service with in-memory order_tags and a gated upstream: requests of one order
that arrive while its fetch runs join it (one tag read, one upstream call), never across
users; the tag is read before the data; an order's fetch answers its repeats for a min TTL
while its content tags stay the same."""

from __future__ import annotations

import asyncio
import time

import yaml

from services.bff.config import ProtocolSettings
from services.bff.part_request import RequestedOrder
from services.bff.part_service import PartService
from services.bff.poll import Caller
from services.bff.resources import degraded_memo, recent_memo
from shared.policy import DEFAULT_POLICY_PATH, PollingPolicy, Stage, parse_policy
from shared.protocol.tags import decode_tag, encode_tag
from shared.wire import OrderKey
from tests.services.fakes import FakeOrderTags, GatedUpstream, metrics, tag_cache


def one_document_policy() -> PollingPolicy:
    """The default policy with every taxi part but `slow` served from one upstream document
    (totw), as they were before each had its own service: what a fetch shares is one
    upstream's call, whichever parts ask for it."""
    raw = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    for rule in raw["services"]["taxi"]["rules"]:
        if rule.get("upstream") != "orderperformerinfo":
            rule.pop("upstream", None)
    return parse_policy(raw)


POLICY = one_document_policy()
ENDPOINTS = {e.rule.part_name: e for e in POLICY.endpoints if e.stage is Stage.CURRENT}
ORDER = [RequestedOrder("t1", None)]


def service(
    tags: FakeOrderTags,
    upstream: GatedUpstream,
    *,
    coalesce: bool = True,
    remember_recent: bool = True,
    performer: GatedUpstream | None = None,
) -> PartService:
    # the slow part's own upstream (orderperformerinfo), the rest's totw
    upstreams = {"totw": upstream, "orderperformerinfo": performer or GatedUpstream([])}
    recent = ProtocolSettings().part_fetches.recent_memo_bytes if remember_recent else 0
    settings = ProtocolSettings(part_fetches={"recent_memo_bytes": recent})
    return PartService(
        POLICY,
        tag_cache(tags),
        upstreams,  # type: ignore[arg-type]
        metrics(),
        {},  # no route requests here: no order source
        coalesce=coalesce,
        degraded_memo=degraded_memo(settings),
        recent_memo=recent_memo(settings),
    )


def user(uid: str) -> Caller:
    return Caller(uid, {"X-Yandex-UID": uid})


async def test_parts_of_one_order_fetched_together_cost_one_tag_read_and_one_upstream_call():
    log: list[str] = []
    tags, upstream = FakeOrderTags(), GatedUpstream(log)
    tags.stored[OrderKey("taxi", "t1")] = {"fast_info": "f1", "rarely_changed": "r1"}
    parts = service(tags, upstream)
    # the second request arrives while the first one's fetch is in flight
    [fast_part], [rare_part], _ = await asyncio.gather(
        parts.fetch_parts(ENDPOINTS["fast_info"], ORDER, {}, user("u")),
        parts.fetch_parts(ENDPOINTS["rarely_changed"], ORDER, {}, user("u")),
        upstream.release_after(1),
    )
    assert tags.calls == ["get"] and len(upstream.bodies) == 1
    assert set(fast_part) == {"orderid", "tag", "status", "eta"}
    assert set(rare_part) == {"orderid", "tag", "comment"}
    assert decode_tag(fast_part["tag"]).content == "f1"  # type: ignore[union-attr]
    assert decode_tag(rare_part["tag"]).content == "r1"  # type: ignore[union-attr]


async def test_the_content_tag_is_read_before_the_upstream_is_called():
    log: list[str] = []
    tags, upstream = FakeOrderTags(), GatedUpstream(log)
    tags.calls = log  # one log of both fakes, in order
    upstream.release.set()
    await service(tags, upstream).fetch_parts(ENDPOINTS["fast_info"], ORDER, {}, user("u"))
    assert log == ["get", "upstream"]


async def test_requests_of_two_users_never_share_a_fetch():
    tags, upstream = FakeOrderTags(), GatedUpstream([])
    parts = service(tags, upstream)
    # held until both calls arrived: were they one fetch, the second would never come
    async with asyncio.timeout(5):
        await asyncio.gather(
            parts.fetch_parts(ENDPOINTS["fast_info"], ORDER, {}, user("a")),
            parts.fetch_parts(ENDPOINTS["chat"], ORDER, {}, user("b")),
            upstream.release_after(2),
        )
    assert tags.calls == ["get", "get"] and len(upstream.bodies) == 2


async def test_with_coalescing_off_every_request_makes_its_own_call():
    tags, upstream = FakeOrderTags(), GatedUpstream([])
    upstream.release.set()
    parts = service(tags, upstream, coalesce=False, remember_recent=False)
    await asyncio.gather(
        parts.fetch_parts(ENDPOINTS["fast_info"], ORDER, {}, user("u")),
        parts.fetch_parts(ENDPOINTS["chat"], ORDER, {}, user("u")),
    )
    assert len(upstream.bodies) == 2


async def test_with_the_cache_down_an_order_costs_each_upstream_one_call_however_fetched():
    log: list[str] = []
    tags, upstream, performer = FakeOrderTags(), GatedUpstream(log), GatedUpstream([])
    tags.down = True
    upstream.release.set()
    performer.release.set()
    parts = service(tags, upstream, performer=performer)
    # one part after another, as a client that fetches one request at a time
    answers = [
        (await parts.fetch_parts(ENDPOINTS[name], ORDER, {}, user("u")))[0]
        for name in ("fast_info", "rarely_changed", "chat", "slow")
    ]
    assert len(upstream.bodies) == 1  # totw, for fast_info, rarely_changed and chat
    assert len(performer.bodies) == 1  # the slow part's own upstream
    issued = [decode_tag(answer["tag"]) for answer in answers]
    # each tag says it was issued while the cache was down, at the one fetch's moment
    assert all(tag is not None and tag.degraded and tag.content is None for tag in issued)
    # the three totw parts were issued at that one fetch's moment
    assert len({tag.issued_ms for tag in issued[:3] if tag is not None}) == 1
    # another user's request for the same order id is never answered from it
    await parts.fetch_parts(ENDPOINTS["fast_info"], ORDER, {}, user("someone-else"))
    assert len(upstream.bodies) == 2


async def test_with_the_cache_up_an_order_costs_one_call_per_min_ttl_while_its_tags_stay():
    tags, upstream = FakeOrderTags(), GatedUpstream([])
    tags.stored[OrderKey("taxi", "t1")] = {"fast_info": "f1", "rarely_changed": "r1"}
    upstream.release.set()
    parts = service(tags, upstream)
    # a client sending part requests one after another, as fast as it can
    answers = [
        (await parts.fetch_parts(ENDPOINTS[name], ORDER, {}, user("u")))[0]
        for name in ("fast_info", "rarely_changed", "fast_info", "fast_info")
    ]
    assert len(upstream.bodies) == 1
    issued = [decode_tag(answer["tag"]) for answer in answers]
    assert [tag.content for tag in issued if tag] == ["f1", "r1", "f1", "f1"]
    # the tag's age is the data's age: issued at the one fetch
    assert len({tag.issued_ms for tag in issued if tag}) == 1
    assert tags.calls == ["get"] * 4, "the content tags are read for every request"
    # another user's request for the same order id is never answered from it
    await parts.fetch_parts(ENDPOINTS["fast_info"], ORDER, {}, user("someone-else"))
    assert len(upstream.bodies) == 2


async def test_a_change_of_the_orders_content_tags_is_fetched_at_once():
    tags, upstream = FakeOrderTags(), GatedUpstream([])
    tags.stored[OrderKey("taxi", "t1")] = {"fast_info": "f1", "rarely_changed": "r1"}
    upstream.release.set()
    parts = service(tags, upstream)
    await parts.fetch_parts(ENDPOINTS["fast_info"], ORDER, {}, user("u"))
    # a feature changed the data, then bumped the tag (of any part of the order)
    tags.stored[OrderKey("taxi", "t1")] = {"fast_info": "f1", "rarely_changed": "r2"}
    [part] = await parts.fetch_parts(ENDPOINTS["fast_info"], ORDER, {}, user("u"))
    assert len(upstream.bodies) == 2
    assert decode_tag(part["tag"]).content == "f1"  # type: ignore[union-attr]


# docs/protocol.md: the upstream gets the client's content tag of each part, never its tag


def client_tag(part: str, content: str | None) -> str:
    return encode_tag(ENDPOINTS[part].policy_version, content, int(time.time() * 1000) - 5000)


async def test_the_upstream_gets_the_clients_content_tag_of_the_part_not_its_tag():
    tags, upstream = FakeOrderTags(), GatedUpstream([])
    tags.stored[OrderKey("taxi", "t1")] = {"fast_info": "v18"}
    upstream.release.set()
    held = client_tag("fast_info", "v17")
    await service(tags, upstream).fetch_parts(
        ENDPOINTS["fast_info"],
        [RequestedOrder("t1", held)],
        {"position": {"point": [37.6, 55.7], "dx": 20}},
        user("u"),
    )
    [body] = upstream.bodies
    assert body == {
        "position": {"point": [37.6, 55.7], "dx": 20},
        "orderid": "t1",
        "tags": {"fast_info": "v17"},
        # the stored content tag the answer will carry: data no older, please
        "at_least": {"fast_info": "v18"},
    }
    assert held not in str(body)


async def test_one_call_for_several_parts_carries_each_parts_content_tag():
    tags, upstream = FakeOrderTags(), GatedUpstream([])
    tags.stored[OrderKey("taxi", "t1")] = {"fast_info": "v18", "rarely_changed": "r2"}
    parts = service(tags, upstream)
    await asyncio.gather(
        parts.fetch_parts(
            ENDPOINTS["fast_info"],
            [RequestedOrder("t1", client_tag("fast_info", "v17"))],
            {},
            user("u"),
        ),
        parts.fetch_parts(
            ENDPOINTS["rarely_changed"],
            [RequestedOrder("t1", client_tag("rarely_changed", "r1"))],
            {},
            user("u"),
        ),
        upstream.release_after(1),
    )
    [body] = upstream.bodies
    assert body["tags"] == {"fast_info": "v17", "rarely_changed": "r1"}
    assert body["at_least"] == {"fast_info": "v18", "rarely_changed": "r2"}


async def test_a_part_the_client_holds_no_content_tag_for_sends_none():
    tags, upstream = FakeOrderTags(), GatedUpstream([])
    upstream.release.set()
    parts = service(tags, upstream, remember_recent=False)
    # a new part, and one whose tag was issued while the tag cache was down; a client's own
    # "tags" or "at_least" field is not taken for the server's
    for held in (None, encode_tag(ENDPOINTS["fast_info"].policy_version, None, 1, degraded=True)):
        await parts.fetch_parts(
            ENDPOINTS["fast_info"],
            [RequestedOrder("t1", held)],
            {"tags": "mine", "at_least": "mine"},
            user("u"),
        )
    # (nothing stored either: no at_least)
    assert [set(body) for body in upstream.bodies] == [{"orderid"}, {"orderid"}]

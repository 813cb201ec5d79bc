"""The orders state engine with in-memory sources and order_tags: one tag read per poll,
tags created where missing, stale echo, degraded answers. The decisions themselves are
tested rule by rule in tests/shared/protocol."""

from __future__ import annotations

import dataclasses
import random
import time

import msgspec

from services.bff.config import ProtocolSettings
from services.bff.engine import OrdersStateEngine
from services.bff.known_orders import ParsedKnownOrder, parse_known_orders
from services.bff.poll import Caller, Poll
from services.bff.resources import engine_config, limits
from shared.answer import ActualOrder, StaleOrder
from shared.policy import load_policy
from shared.protocol.tags import encode_tag
from shared.upstream_wire import SourceKnownOrder
from shared.wire import OrderKey
from tests.services.fakes import FakeOrderTags, FakeSource, metrics, tag_cache

POLICY = load_policy()
SETTINGS = ProtocolSettings(interval={"jitter": 0.0})
CONFIG = engine_config(SETTINGS, POLICY)
T0 = "2026-01-01T10:00:00.000Z"
T1 = "2026-01-01T10:05:00.000Z"


def engine(tags: FakeOrderTags, **sources: FakeSource) -> OrdersStateEngine:
    all_sources = {service: sources.get(service, FakeSource()) for service in POLICY.services}
    # list tags off, as for services whose policy does not opt in: the fake keeps no lists
    config = dataclasses.replace(CONFIG, list_tags=False)
    return OrdersStateEngine(
        POLICY, all_sources, tag_cache(tags), config, metrics(), rng=random.Random(0)
    )


def poll(known: list[ParsedKnownOrder], services: list[str]) -> Poll:
    return Poll(Caller("u", {"X-Yandex-UID": "u"}), known, services)


def known(*orders: dict) -> list:
    return parse_known_orders(list(orders), limits(SETTINGS))


async def test_one_poll_reads_the_tags_of_all_its_orders_in_one_call():
    tags = FakeOrderTags()
    taxi = FakeSource([("t1", "driving", T0), ("t2", "searching", T1)])
    eats = FakeSource([("e1", "cooking", T0)])
    for key in (OrderKey("taxi", "t1"), OrderKey("taxi", "t2"), OrderKey("eats", "e1")):
        tags.stored[key] = dict.fromkeys(POLICY.services["taxi"].tagged_parts, "v1")
        tags.owners[key] = "u"
    tags.stored[OrderKey("eats", "e1")] = {"full_info": "f"}
    result = await engine(tags, taxi=taxi, eats=eats).look(poll([], ["taxi", "eats"]))
    assert tags.calls == ["get"]
    assert [o.orderid for o in result.orders] == ["e1", "t1", "t2"]  # canonical order
    assert all(isinstance(o, ActualOrder) for o in result.orders)


async def test_an_order_with_no_tags_gets_them_for_every_non_static_part_before_the_answer():
    tags = FakeOrderTags()
    result = await engine(tags, taxi=FakeSource([("t1", "driving", T0)])).look(poll([], ["taxi"]))
    assert tags.calls == ["get", "create"]
    created = tags.stored[OrderKey("taxi", "t1")]
    # of every served version: the deprecated layout's `main` reads its own content tag
    taxi_rules = [rule for rules in POLICY.services["taxi"].versions.values() for rule in rules]
    assert set(created) == {r.part_name for r in taxi_rules if r.tag_defined and not r.static}
    assert "main" in created
    # a client that knows nothing needs every tag_defined part, by priority
    [order] = result.orders
    assert order.need_request == ["fast_info", "rarely_changed", "static", "chat", "slow"]


async def test_tags_that_name_no_owner_are_given_the_user_its_source_listed_them_for():
    """order_tags counts a force only on its owner's order: tags a feature's bump made again
    after a flush name none, and the poll that lists the order names its user (a create
    that writes no part), once."""
    tags = FakeOrderTags()
    key = OrderKey("taxi", "t1")
    tags.stored[key] = dict.fromkeys(POLICY.services["taxi"].tagged_parts, "v1")
    bff = engine(tags, taxi=FakeSource([("t1", "driving", T0)]))
    await bff.look(poll([], ["taxi"]))
    assert tags.calls == ["get", "create"] and tags.owners == {key: "u"}
    assert tags.stored[key] == dict.fromkeys(POLICY.services["taxi"].tagged_parts, "v1")
    await bff.look(poll([], ["taxi"]))
    assert tags.calls[2:] == ["get"]


async def test_a_change_on_tags_that_only_needed_their_owner_named_is_due_after_the_min_ttl():
    """Naming the owner of tags a feature's bump wrote makes no tag: a part the client holds
    at older content is due after the min TTL, not spread as a part whose tags were lost and
    made again (the simulation's seed 40433 waited 5 s more for it)."""
    tags = FakeOrderTags()
    key = OrderKey("taxi", "t1")
    tags.stored[key] = dict.fromkeys(POLICY.services["taxi"].tagged_parts, "v2")
    held = encode_tag(POLICY.version("taxi"), "v1", int(time.time() * 1000) - 60_000)
    client = {"orderid": "t1", "service": "taxi", "status": "driving", "tags": {"fast_info": held}}
    bff = engine(tags, taxi=FakeSource([("t1", "driving", T0)]))
    result = await bff.look(poll(known(client), ["taxi"]))
    assert tags.calls == ["get", "create"]
    [order] = result.orders
    assert "fast_info" in order.need_request


async def test_a_known_order_of_an_unavailable_source_comes_back_as_the_client_sent_it():
    tags = FakeOrderTags()
    eats = FakeSource([("e1", "cooking", T0)])
    eats.available = False
    client = {"orderid": "e1", "service": "eats", "status": "cooking", "tags": {}, "note": "x"}
    result = await engine(tags, eats=eats).look(poll(known(client), ["eats"]))
    [order] = result.orders
    assert isinstance(order, StaleOrder) and order.echo == {"note": "x"}
    assert order.need_request == [] and order.status == "cooking"
    assert result.allowed_changes[0].no_more_orders_reason == "service_unavailable"
    # the poll's one read, before any source answers (the known orders' tags); no second
    assert tags.calls == ["get"]


async def test_a_stale_order_echoes_the_client_s_version_a_malformed_one_as_its_own_field():
    eats = FakeSource([("e1", "cooking", T0), ("e2", "cooking", T0)])
    eats.available = False
    client = [
        {"orderid": "e1", "service": "eats", "status": "cooking", "version": 7},
        {"orderid": "e2", "service": "eats", "status": "cooking", "version": "7"},
    ]
    result = await engine(FakeOrderTags(), eats=eats).look(poll(known(*client), ["eats"]))
    well_formed, malformed = result.orders
    assert isinstance(well_formed, StaleOrder) and well_formed.version == 7
    assert isinstance(malformed, StaleOrder) and malformed.version is None
    assert malformed.echo == {"version": "7"}


async def test_an_answer_older_than_the_echoed_version_is_stale_and_its_service_lagging():
    taxi = FakeSource([("t1", "driving", T0), ("t2", "driving", T0)])
    taxi.orders = [msgspec.structs.replace(o, version=4) for o in taxi.orders]
    client = [
        {"orderid": "t1", "service": "taxi", "status": "searching", "version": 5},
        {"orderid": "t2", "service": "taxi", "status": "driving", "version": 4},
    ]
    result = await engine(FakeOrderTags(), taxi=taxi).look(poll(known(*client), ["taxi"]))
    by_id = {order.orderid: order for order in result.orders}
    ahead, current = by_id["t1"], by_id["t2"]
    # never actual at 4 after the client showed 5: its own echo, stale
    assert isinstance(ahead, StaleOrder) and (ahead.status, ahead.version) == ("searching", 5)
    assert isinstance(current, ActualOrder) and current.version == 4
    assert result.source_lagging


async def test_with_the_tag_cache_down_the_poll_is_answered_degraded():
    tags = FakeOrderTags()
    tags.down = True
    taxi = FakeSource([("t1", "driving", T0)])
    result = await engine(tags, taxi=taxi).look(poll([], ["taxi"]))
    [order] = result.orders
    assert isinstance(order, ActualOrder)
    assert result.interval_ms == 2 * 3000  # driving's base, doubled while degraded


async def test_a_user_with_more_orders_than_one_batch_takes_is_read_in_batches_within_the_limit():
    tags = FakeOrderTags()
    many = FakeSource([(f"t{i:03}", "driving", T0) for i in range(150)])
    result = await engine(tags, taxi=many).look(poll([], ["taxi"]))
    # two reads (100 + 50), then one write per hundred orders creates all their missing tags
    assert sorted(tags.calls) == ["create", "create", "get", "get"]
    assert len(result.orders) == 150
    assert not result.degraded
    assert all(isinstance(o, ActualOrder) for o in result.orders)


async def test_a_refused_tag_read_degrades_that_poll_and_never_opens_the_circuit_for_others():
    tags = FakeOrderTags()
    polls = engine(tags, taxi=FakeSource([("t1", "driving", T0)]))
    tags.refuse = True  # order_tags answers 400: the request was refused, the cache works
    for _ in range(polls.tag_cache.circuit.failures_to_open + 1):
        assert (await polls.look(poll([], ["taxi"]))).degraded
    assert not polls.tag_cache.circuit.is_open
    tags.refuse = False
    result = await polls.look(poll([], ["taxi"]))
    assert not result.degraded and tags.calls[-2:] == ["get", "create"]


async def test_an_unavailable_tag_cache_opens_the_circuit():
    tags = FakeOrderTags()
    polls = engine(tags, taxi=FakeSource([("t1", "driving", T0)]))
    tags.down = True
    for _ in range(polls.tag_cache.circuit.failures_to_open):
        await polls.look(poll([], ["taxi"]))
    assert polls.tag_cache.circuit.is_open


async def test_each_source_is_told_the_clients_known_orders_with_their_content_tags():
    tags = FakeOrderTags()
    taxi, eats = FakeSource([("t1", "driving", T0)]), FakeSource([("e1", "cooking", T0)])
    issued = int(time.time() * 1000) - 5000
    taxi_tags = {
        "fast_info": encode_tag(POLICY.version("taxi"), "v17", issued),
        "chat": encode_tag(POLICY.version("taxi"), None, issued, degraded=True),
    }
    clients = known(
        {"orderid": "t1", "service": "taxi", "status": "driving", "tags": taxi_tags},
        {"orderid": "e1", "service": "eats", "status": "cooking", "tags": {}},
    )
    await engine(tags, taxi=taxi, eats=eats).look(poll(clients, ["taxi", "eats"]))
    # the content tag the client holds, not its tag; none where it holds none
    assert taxi.told == [[SourceKnownOrder("t1", {"fast_info": "v17"})]]
    assert eats.told == [[SourceKnownOrder("e1", {})]]

"""The reference client does what the design asks (issue 27; docs/protocol.md: Writing a
client), against a real stack: the view changes as each part lands and only a required part
holds it, every launch order is shown at once, part requests carry their part type's
parameters, stale orders echo their brief fields, a part error marks all of its rule's fields,
and a restarted app revalidates its saved tags instead of fetching again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from client.client import MlutpClient
from client.model import ClientOptions, OrderView, Position
from client.store import known_orders
from tests.emulator_api import (
    ORDER_CORE,
    advance,
    create_order_id,
    set_fault,
    set_taxi_parts_fault,
    stats,
)
from tests.helpers import protocol_for_tests

MakeClient = Callable[..., MlutpClient]
OPTIONS = ClientOptions(backoff_base_s=0, poll_route=False)


class Recorded:
    """What the client sends (path and body, in order) and the frames it shows, in one
    sequence: the order of requests and frames is what the design speaks of."""

    def __init__(self, client: MlutpClient) -> None:
        self.events: list[tuple[str, Any]] = []
        call = client.transport.call

        async def recording_call(url: str, body: dict[str, Any], **kwargs: Any) -> Any:
            self.events.append(("request", (url, body)))
            return await call(url, body, **kwargs)

        client.transport.call = recording_call  # type: ignore[method-assign]
        client.views.on_change = lambda views: self.events.append(("frame", views))

    def requests(self, path_part: str) -> list[dict[str, Any]]:
        return [body for kind, (url, body) in self._of("request") if path_part in url]

    def frames(self) -> list[list[OrderView]]:
        return [views for kind, views in self.events if kind == "frame"]

    def _of(self, kind: str) -> list[Any]:
        return [(k, value) for k, value in self.events if k == kind]


async def test_a_status_change_shows_before_a_slow_part_lands(
    make_client: MakeClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="searching")
    client = make_client(unique, OPTIONS)
    await client.launch()
    await set_fault(emulator, "part:orderperformerinfo", "slow", 3000)
    try:
        # driving: fast_info (required) and slow (the performer's upstream, 3 s late) change
        await advance(emulator, "taxi", orderid)
        driving = asyncio.Event()
        client.views.on_change = lambda views: (
            driving.set() if views and views[0].data.get("status") == "driving" else None
        )
        cycle = asyncio.create_task(client.cycle())
        # a bound, not a pause: the view shows the new status while the slow part is out
        await asyncio.wait_for(driving.wait(), timeout=2.5)
        assert not cycle.done()
        assert "orderperformerinfo" not in client.view()[0].data
        await cycle
        # past its upstream's deadline: the part failed, its field is marked, the rest stands
        [view] = client.view()
        assert view.status == "driving" and "orderperformerinfo" in view.stale_fields
    finally:
        await set_fault(emulator, "part:orderperformerinfo", "ok")


async def test_every_launch_order_is_shown_before_any_part_is_asked_for(
    make_client: MakeClient, emulator: TestClient, unique: str
):
    ids = {await create_order_id(emulator, unique, service) for service in ("taxi", "eats")}
    client = make_client(unique, ClientOptions(extended_order_info=False, poll_route=False))
    recorded = Recorded(client)
    await client.launch()
    first_part = next(
        i
        for i, (kind, value) in enumerate(recorded.events)
        if kind == "request" and "/mlutp/v1/" in value[0]
    )
    first_frame = next(i for i, (kind, _) in enumerate(recorded.events) if kind == "frame")
    assert first_frame < first_part
    shown = recorded.events[first_frame][1]
    assert {view.orderid for view in shown} == ids
    assert all(view.loading for view in shown)  # placeholders: their parts are on the way
    assert not any(view.loading for view in client.view())


async def test_part_requests_and_launch_carry_the_part_types_parameters(
    make_client: MakeClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    client = make_client(unique, OPTIONS)
    client.position = Position((37.6, 55.7), 1009)
    recorded = Recorded(client)
    await client.launch()
    [launch] = recorded.requests("/4.0/launch")
    # docs/protocol.md (Part endpoints): the position with its accuracy in metres
    expected = {
        "format_currency": True,
        "extend_freecars": False,
        "supported": [],
        "position": {"point": [37.6, 55.7], "dx": 1009},
    }
    assert launch["part_parameters"]["totw"] == expected
    parts = recorded.requests("/mlutp/v1/taxi/")
    assert parts, "the parts launch did not inline are asked for"
    for body in parts:
        assert {k: v for k, v in body.items() if k != "orders"} == expected
    # the part services read it: every part landed, none stale for a refused request
    [view] = client.view()
    assert not view.loading and not view.stale_fields
    last = (await stats(emulator))["recent"][ORDER_CORE][-1]
    assert last["body"]["position"] == expected["position"]


def test_a_position_with_an_accuracy_totw_would_refuse_is_refused_where_it_is_set():
    for point, dx in (
        ((37.6, 55.7), -1.0),
        ((37.6, 55.7), float("nan")),
        ((float("inf"), 55.7), 5),
    ):
        with pytest.raises(ValueError):
            Position(point, dx)


# the source is asked on every poll (list tags off): with list tags a down source's kept
# answer would stand in for it
@pytest.mark.parametrize("protocol", [protocol_for_tests(min_ttl_s=0, list_tags=False)])
async def test_a_stale_order_keeps_its_brief_fields_by_echoing_them(
    make_client: MakeClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, "eats")
    client = make_client(unique, OPTIONS)
    await client.launch()
    [actual] = client.view()
    assert {"place_name", "items_count"} <= set(actual.brief)
    [sent] = known_orders(client.orders)
    assert {k: sent[k] for k in actual.brief} == actual.brief  # echo fields, as received
    await set_fault(emulator, "source:eats", "down")
    try:
        recorded = Recorded(client)
        await client.cycle()
    finally:
        await set_fault(emulator, "source:eats", "ok")
    [poll] = recorded.requests("/orders/state")
    assert poll["known_orders"][0]["place_name"] == actual.brief["place_name"]
    [stale] = client.view()
    assert stale.update_status == "stale" and stale.brief == actual.brief


async def test_a_part_error_marks_every_field_of_its_rule_stale(
    make_client: MakeClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    client = make_client(unique, ClientOptions(extended_order_info=False, poll_route=False))
    await set_taxi_parts_fault(emulator, "error500")
    try:
        await client.launch()  # no part ever arrived: none of their fields is held
    finally:
        await set_taxi_parts_fault(emulator, "ok")
    [view] = client.view()
    failed = [r for r in client.rules["taxi"] if r.part_type == "totw" and r.part_name != "slow"]
    for rule in failed:
        assert set(rule.fields) <= view.stale_fields, rule.part_name
    assert view.data == {}


async def test_a_restarted_app_shows_its_orders_at_once_and_fetches_nothing_unchanged(
    make_client: MakeClient, emulator: TestClient, unique: str, tmp_path: Path
):
    for service in ("taxi", "eats"):
        await create_order_id(emulator, unique, service)
    options = ClientOptions(poll_route=False, state_file=tmp_path / "client.json")
    before = make_client(unique, options)
    await before.launch()
    await before.cycle()
    shown = {(v.orderid, v.status): v.data for v in before.view()}
    assert shown and all(shown.values())

    after = make_client(unique, options)  # the app starts again
    assert {(v.orderid, v.status): v.data for v in after.view()} == shown  # from its cache
    await after.launch()
    await after.cycle()
    assert after.stats.part_requests == 0
    assert {(v.orderid, v.status): v.data for v in after.view()} == shown
    assert not any(v.loading or v.update_status == "stale" for v in after.view())


async def test_a_saved_state_the_client_cannot_read_starts_it_afresh(
    make_client: MakeClient, emulator: TestClient, unique: str, tmp_path: Path
):
    await create_order_id(emulator, unique, status="driving")
    state_file = tmp_path / "client.json"
    state_file.write_text('{"version": 1, "orders": [{"orderid": 5}]')
    client = make_client(unique, ClientOptions(poll_route=False, state_file=state_file))
    assert client.view() == []
    await client.launch()
    [view] = client.view()
    assert view.status == "driving" and not view.loading

"""docs/protocol.md: a new service is configuration, not code. A service the code has never
heard of (`pharmacy`: its order source, one part, the part's own upstream) is added to the
policy file alone; the emulator serves it generically from that same file, and the reference
client polls it end to end."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from client.client import MlutpClient
from client.model import ClientOptions
from emulator.app import create_app as create_emulator
from services.bff.config import ProtocolSettings
from shared.policy import DEFAULT_POLICY_PATH
from tests.conftest import emulator_settings
from tests.emulator_api import advance, create_order_id, stats
from tests.helpers import protocol_for_tests

PHARMACY = {
    "interval_bases_ms": {"created": 10000, "assembling": 10000, "delivering": 5000},
    "change_capabilities": ["cancel", "comment"],
    "list_tags": True,
    "rules": [
        {
            "part_name": "full_info",
            "url": "/mlutp/v1/pharmacy/full_info",
            "fields": ["version", "status", "status_info", "place", "items", "eta", "total"],
            "polling_type": "tag_defined",
            # a format clients already know; fetched from the pharmacy's own upstream
            "part_type": "grocery_full",
            "upstream": "pharmacy_details",
            "priority": 0,
            "required": True,
        },
        {
            # a part type no client of today knows (a newer app's): clients ignore it
            "part_name": "hologram",
            "url": "/mlutp/v1/pharmacy/hologram",
            "fields": ["hologram"],
            "polling_type": "tag_defined",
            "part_type": "hologram_3d",
            "upstream": "pharmacy_hologram",
            "priority": 1,
            "required": True,
        },
    ],
}


@pytest.fixture
def policy_path(tmp_path: Path) -> Path:
    policy = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    policy["services"]["pharmacy"] = PHARMACY
    path = tmp_path / "polling_policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    return path


@pytest.fixture
def protocol(policy_path: Path) -> ProtocolSettings:
    return protocol_for_tests(min_ttl_s=0, policy_path=policy_path)


@pytest.fixture
async def emulator_server(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    order_tags_server: TestServer,
    policy_path: Path,
) -> TestServer:
    settings = emulator_settings(order_tags_server).model_copy(update={"policy_path": policy_path})
    return await aiohttp_server(create_emulator(settings))


async def test_a_service_added_to_the_policy_file_alone_is_polled_end_to_end(
    bff_urls: tuple[str, str], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, "pharmacy")
    async with aiohttp.ClientSession() as session:
        client = MlutpClient(
            session,
            launch_url=bff_urls[0],
            orders_state_url=bff_urls[1],
            user_id=unique,
            supported_services=("taxi", "pharmacy"),
            # no parts inline at launch: each part the client knows is asked for
            options=ClientOptions(backoff_base_s=0, poll_route=False, extended_order_info=False),
        )
        asked: list[str] = []
        call = client.transport.call

        async def recording_call(url: str, body: dict[str, Any], **kwargs: Any) -> Any:
            asked.append(url)
            return await call(url, body, **kwargs)

        client.transport.call = recording_call  # type: ignore[method-assign]
        await client.launch()
        [view] = client.view()
        assert (view.service, view.orderid, view.status) == ("pharmacy", orderid, "created")
        assert view.data["place"]["name"] and view.data["items"]  # from its part's upstream
        await advance(emulator, "pharmacy", orderid)
        await client.cycle()
        [view] = client.view()
        assert view.status == "assembling" and view.data["status"] == "assembling"
    served = await stats(emulator)
    assert served["calls"]["source:pharmacy"] >= 1
    assert served["calls"]["part:pharmacy_details"] >= 1
    # the client never asked for the part of a type it does not know, and its being required
    # held nothing: the order is shown with its known part's data
    assert asked and not [url for url in asked if "hologram" in url]
    assert not view.loading

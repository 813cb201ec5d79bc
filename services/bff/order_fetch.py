"""One order's part fetch (services/bff/part_service.py): what makes two part requests one
fetch, the fetch the requests joined in it share, and what a part request read of its orders'
tags before its fetches."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum

from services.bff.part_request import RequestedOrder
from services.bff.ports import Fetched
from services.bff.tag_cache import StoredTags


@dataclass(frozen=True)
class FetchKey:
    """What makes two part requests one fetch: the same upstream, order and user. What else
    the request carries (its other fields, User-Agent, Accept-Language) is the same client's
    choice within a memo's few seconds: varying it must not buy an upstream call more, or a
    client could make the part upstreams' load whatever it likes."""

    upstream: str
    service: str
    orderid: str
    user_id: str


@dataclass
class OrderFetch:
    """One read of an order's content tags, then one upstream call for it."""

    fetched: asyncio.Future[Fetched]
    stored: dict[str, str] | None = None
    cache_available: bool = False
    issued_ms: int = 0
    # the content tags the requests joined in it hold, by part: the upstream call carries
    # those of the requests that joined before it was sent (a later one gets data at least
    # as new as the tags read before the call, which are never older than its own)
    content_tags: dict[str, str] = field(default_factory=dict)
    # the parts the requests joined before the call ask for: the call asks for data at least
    # as new as their stored content tags
    parts: set[str] = field(default_factory=set)
    # the digest of the parameters its upstream call was sent, and whether the call was
    # made (not answered by a memo): a joined request asking another question shares the
    # answer, but it is kept only under the question asked
    params: str = ""
    called: bool = False


@dataclass(frozen=True)
class StartedFetch:
    """A fetch this request started (the others it joined)."""

    order: RequestedOrder
    fetch: OrderFetch
    key: FetchKey


class NotRead(Enum):
    """A part request whose orders' tags were not read before its fetches (none held a
    tag): the fetch reads them."""

    NOT_READ = "not read"


NOT_READ = NotRead.NOT_READ
# what a part request read of its orders' tags before its fetches: the tags, None (the tag
# cache unavailable), or nothing yet
Preread = StoredTags | None | NotRead

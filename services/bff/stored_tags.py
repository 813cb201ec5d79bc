"""The tags of the orders a look's sources listed (services.bff.engine): those the poll's
first read had, the rest read now, and those missing made (docs/protocol.md: Tags and
need_request)."""

from __future__ import annotations

import time

from services.bff.tag_cache import StoredTags, TagCache, TagsRead
from shared.policy import PollingPolicy
from shared.wire import OrderKey


async def stored_tags(
    tag_cache: TagCache,
    policy: PollingPolicy,
    keys: list[OrderKey],
    read: TagsRead | None,
    creatable: set[OrderKey],
    user_id: str,
    order_versions: dict[OrderKey, int],
) -> tuple[StoredTags, dict[OrderKey, int]] | None:
    """The tags of the orders the sources listed: those the poll's first read had, and
    the rest read now (a new order), with when a create made each order's tags; None
    when the tag cache is unavailable. Tags are made only for the `creatable` orders:
    those a current answer, just asked, lists for this user, with the `order_versions`
    it listed. A kept or lagging answer may still list an order that has finished (its tags
    deleted), which must not get tags again with no owner for a day."""
    if read is None:
        return None
    stored: StoredTags = {key: read.tags[key] for key in keys if key in read.tags}
    owners = dict(read.owners)
    made_ms = dict(read.made_ms)
    unread = [key for key in keys if key not in read.tags]
    if unread:
        more = await tag_cache.read(unread, [])
        if more is None:
            return None
        stored.update(more.tags)
        owners.update(more.owners)
        made_ms.update(more.made_ms)
    # every tagged part (of every served version) gets a content tag before the answer, so
    # a part fetched right after this poll is issued a tag that stays valid: all of them
    # for a new or expired order, and a part its hash lacks (one a new policy version
    # added), which would otherwise carry no content and be refetched for good
    missing: dict[OrderKey, list[str]] = {}
    # the orders some of whose parts the create makes (not only names the owner of)
    making: set[OrderKey] = set()
    for key in keys:
        if key not in creatable:
            continue
        parts = stored.get(key)
        tagged = policy.services[key.service].tagged_parts
        absent = [part for part in tagged if parts is None or part not in parts]
        if absent:
            missing[key] = absent
            making.add(key)
        elif tagged and parts and key not in owners:
            # tags that name no owner (made again by a feature's bump after a flush):
            # the create writes no part, but names the user whose source listed it, or
            # its owner's force would never count again (order_tags counts only an
            # owner's force)
            missing[key] = list(tagged)
    if missing:
        made = await tag_cache.create_missing(missing, user_id, order_versions)
        stored.update(made)
        # a create that makes any of an order's tags notes when (made_ms): a part lost
        # and made again differs from the client's because it was lost, not changed
        now_ms = int(time.time() * 1000)
        for key in making:
            if key in made:
                made_ms[key] = now_ms
    return stored, made_ms

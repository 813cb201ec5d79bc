"""The digest request's store (docs/protocol.md: The digest request): per process, what the
parse of each user's last few full orders/state bodies produced, by the body's digest, so that
a client repeating its body may send its digest alone and the server skips the decode and
parse of the body (and, for a waiting poll, the watch cache's key of it). Bounded: a few
bodies per user (its devices), and a total by count and by body bytes, least recently used
dropped first. A digest not kept is an error the client answers with the full body."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from services.bff.known_orders import ParsedKnownOrder, parse_poll
from services.bff.poll import Caller, Poll
from services.bff.wire import DigestRequest, StateRequest
from services.orders_state.waiting.kept_looks import body_key
from shared import wire
from shared.errors import BadRequest, UnknownRequestDigest
from shared.protocol.limits import Limits

_digest_request = msgspec.json.Decoder(DigestRequest)
# what KeptRequest._body_key holds before it is computed
_NOT_YET: object = object()


@dataclass
class KeptRequest:
    """One full body as its parse produced it, with what the handler reads of it."""

    known_orders: Sequence[ParsedKnownOrder]
    services: Sequence[str]
    stated_versions: Mapping[str, str]
    wait_ms: int
    answer_tag: str | None
    # supported_services names not considered, by why (counted again on each request)
    ignored: Mapping[str, int]
    # the body's bytes (as decoded): its weight against the store's byte cap
    size: int
    _body_key: object = field(default=_NOT_YET, repr=False)

    def poll(self, caller: Caller) -> Poll:
        """This body as the poll of a request of `caller` (its request id and headers)."""
        return Poll(caller, self.known_orders, self.services, self.stated_versions, self.wait_ms)

    def body_key(self, poll: Poll) -> Hashable | None:
        """The watch cache's key of the body (`kept_looks.body_key`), computed at the first
        waiting poll that needs it: `poll` is this body's poll (`self.poll`) of any caller,
        since the key holds none of the caller's headers."""
        if self._body_key is _NOT_YET:
            self._body_key = body_key(poll)
        return self._body_key


def parsed_request(limits: Limits, body: StateRequest, size: int) -> KeptRequest:
    """A full body, parsed (a 400 when it breaks a limit)."""
    parsed = parse_poll(limits, body.known_orders, body.supported_services)
    return KeptRequest(
        parsed.known_orders,
        parsed.services,
        body.policy_versions,
        body.wait_ms,
        body.answer_tag,
        parsed.ignored,
        size,
    )


def lone_digest(raw: bytes) -> str:
    """The digest of a digest request's body, which carries nothing else: what it stands for
    is the whole previous body, and a field beside it would say something more."""
    try:
        return wire.decode(_digest_request, raw).request_digest
    except BadRequest as exc:
        raise BadRequest(
            "request_digest stands for a whole previous body: send it alone, or send the full"
            f" body without it ({exc.message})",
            code="invalid_request",
        ) from exc


class KeptRequests:
    """At most `per_user` bodies of one user, `max_entries` in all, and `max_bytes` of body
    bytes in all; a body is kept under its user's id and its digest, so a digest is never
    resolved for another user."""

    def __init__(self, *, per_user: int, max_entries: int, max_bytes: int) -> None:
        self.per_user = per_user
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        # least recently used first
        self._kept: OrderedDict[tuple[str, str], KeptRequest] = OrderedDict()
        self._by_user: dict[str, OrderedDict[str, None]] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def resolve(self, user_id: str, digest: str) -> KeptRequest:
        """The body a digest request stands for; UnknownRequestDigest when it is not kept."""
        kept = self._kept.get((user_id, digest))
        if kept is None:
            raise UnknownRequestDigest(
                "request_digest names no body this server keeps for the user (another"
                " replica's, one from before a restart, or one dropped): send the full body"
            )
        self._kept.move_to_end((user_id, digest))
        self._by_user[user_id].move_to_end(digest)
        return kept

    def keep(self, user_id: str, digest: str, kept: KeptRequest) -> None:
        key = (user_id, digest)
        if key in self._kept:
            # the same bytes parse the same: the one kept stands, its key computed or not
            self._kept.move_to_end(key)
            self._by_user[user_id].move_to_end(digest)
            return
        if kept.size > self.max_bytes:
            return
        self._kept[key] = kept
        self.bytes += kept.size
        users = self._by_user.setdefault(user_id, OrderedDict())
        users[digest] = None
        while len(users) > self.per_user:
            self._drop(user_id, next(iter(users)))
        while len(self._kept) > self.max_entries or self.bytes > self.max_bytes:
            self._drop(*next(iter(self._kept)))

    def _drop(self, user_id: str, digest: str) -> None:
        kept = self._kept.pop((user_id, digest))
        self.bytes -= kept.size
        users = self._by_user[user_id]
        del users[digest]
        if not users:
            del self._by_user[user_id]

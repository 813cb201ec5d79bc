"""The request body's own limits (docs/protocol.md: Errors and limits): a body nested deeper
than the limit is refused before any parser recurses into it, on every Python."""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec
import pytest

from shared import wire
from shared.errors import BadRequest


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(child) for child in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(child) for child in value), default=0)
    return 0


def random_value(rng: random.Random, levels: int) -> Any:
    """JSON whose strings are full of brackets, quotes and backslashes: only real nesting
    counts."""
    if levels == 0 or rng.random() < 0.2:
        return rng.choice(['a[\\"{', 1, "\\", "\\\\", "}]", '"', None, "[[[", "]]]"])
    if rng.random() < 0.5:
        return [random_value(rng, levels - 1) for _ in range(rng.randint(0, 3))]
    return {
        rng.choice(["k", "[", '\\"]', "{{"]) + str(i): random_value(rng, levels - 1)
        for i in range(rng.randint(0, 3))
    }


def test_the_depth_counted_on_the_bytes_is_the_depth_of_the_json():
    rng = random.Random(28)
    for _ in range(5000):
        value = random_value(rng, rng.randint(0, 12))
        limit = rng.randint(0, 12)
        body = json.dumps(value).encode()
        assert wire.nested_deeper_than(body, limit) == (depth_of(value) > limit), body


@pytest.mark.parametrize("field", ["orders", "not_a_field"])
def test_a_body_nested_1000_deep_is_a_400_too_deep_even_in_a_field_the_decoder_skips(field: str):
    class Poll(msgspec.Struct):
        orders: Any = None

    body = b'{"%s": ' % field.encode() + b"[" * 1000 + b"]" * 1000 + b"}"
    with pytest.raises(BadRequest) as refused:
        wire.decode(msgspec.json.Decoder(Poll), body)
    assert refused.value.code == "too_deep"


def test_a_body_as_deep_as_the_limit_is_decoded():
    body = b'{"orders": ' + b"[" * (wire.MAX_BODY_DEPTH - 1) + b"]" * (wire.MAX_BODY_DEPTH - 1)
    decoded = wire.decode(msgspec.json.Decoder(dict[str, Any]), body + b"}")
    assert depth_of(decoded) == wire.MAX_BODY_DEPTH

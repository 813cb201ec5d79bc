"""One packet in ten lost between order_tags and Redis: the tag cache stays available, and the
loss costs latency, not the cache.

The loss is real: Redis runs in a network namespace of the test's own, behind a veth pair and
an nftables rule that drops packets at random both ways (devtools/lossy_link.py). The polls'
tag reads go as in production: the BFF's joined reads, its order_tags client with the poll's
50 ms deadline and its circuit breaker, then order_tags with its Redis deadline and hedge
(benchmarks/redis_packet_loss.py measures the same, before and after, side by side). Without
the hedge, every lost packet failed a call (TCP's 200 ms retransmit is past both deadlines),
the circuit was open 96 % of the time and 98 % of the polls degraded.

Needs root, `ip` and `nft`; skips, saying so, where the machine cannot make the namespace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from benchmarks.redis_packet_loss import Mode, lossy_redis, run_mode
from devtools.lossy_link import LossyLink, LossyLinkUnavailable, lossy_link_unavailable
from services.bff.config import ProtocolSettings
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis

pytestmark = [pytest.mark.fault_matrix, pytest.mark.long, pytest.mark.timeout(120)]

# the polls' rate, as the benchmark's; the run long enough that one opening of the circuit
# (2 s), which a busy machine may still cause without any loss, stays within the margin
RATE = 200.0
SECONDS = 30.0
ONE_IN = 10
# the shares of polls degraded and of the run with the circuit open, at most. Measured on 2
# shared cores: 1-3 % and 0-1 % (without the hedge: 88-99.5 % and over 90 %); beside 8
# busy processes, 1.3-2.4 % and 0 %. When the circuit counted a failed poll, not a failed
# call (one late call of five joined polls opened it), 3 runs in 7 there had it open
# 7-14 % of the time, and CI once failed on 22 % degraded
AT_MOST = 0.10


@pytest.fixture
def lossy() -> Iterator[tuple[LossyLink, EmbeddedRedis]]:
    why = lossy_link_unavailable()
    if why is not None:
        pytest.skip(f"no lossy link on this machine: {why}")
    with contextlib.ExitStack() as stack:
        try:
            link_and_redis = stack.enter_context(lossy_redis())
        except LossyLinkUnavailable as exc:
            pytest.skip(f"no lossy link on this machine: {exc}")
        yield link_and_redis


async def test_one_packet_in_ten_lost_costs_latency_not_the_cache(
    lossy: tuple[LossyLink, EmbeddedRedis],
) -> None:
    link, server = lossy
    # the defaults, as a deployment has them
    mode = Mode(RedisSettings().hedge_after_s, ProtocolSettings().circuit_failures)
    (phase,) = await run_mode(link, server, mode, [ONE_IN], seconds=SECONDS, rate=RATE)
    # the loss was really made (nftables' own count)
    assert 0.07 < phase.dropped < 0.13, phase
    assert phase.degraded <= AT_MOST, phase
    assert phase.circuit_open <= AT_MOST, phase
    # the cost is latency, and most polls pay little of it (measured p50 4-10 ms, p90 25-40 ms)
    assert phase.p50_ms < 25, phase

"""A short `mlutp loadtest` run: it brings up a stack of its own, runs every phase (a Redis
fault included) and writes a well-formed report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.loadtest import LoadtestConfig, peak_window_rate, run_loadtest
from devtools.loadtest.measure import created_elsewhere

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


async def test_a_short_loadtest_writes_a_well_formed_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = LoadtestConfig(
        clients=4,
        duration_s=6,
        warmup_s=2,
        ios_share=1.0,
        faults=("redis",),
        time_scale=30,
        out_dir=tmp_path,
        progress=False,
        created_elsewhere=0.5,
    )
    report = await run_loadtest(config)

    written = json.loads((tmp_path / "report.json").read_text())
    assert written == json.loads(json.dumps(report))
    assert set(written["phases"]) == {
        "legacy",
        "mlutp",
        "mlutp_wait",
        "mlutp_redis_down",
        "mlutp_wait_redis_down",
    }
    for phase in written["phases"].values():
        assert phase["clients"] == 4
        assert phase["requests"] > 0
        assert phase["active_order_minutes"] > 0
        assert len(phase["timeline"]) == 6
        assert set(phase["freshness_s"]) == {"p50", "p95", "p99"}
        assert set(phase["poll_latency_ms"]) == {"p50", "p95", "p99"}
        # the report's peak is its own timeline's busiest window
        assert phase["peak_heavy_calls_per_order_minute"] == peak_window_rate(phase["timeline"])
        assert phase["source_calls_per_client_minute"] >= 0
        # the bytes to the app, split by request path, add up to the phase's bytes
        by_path = phase["bytes_per_client_minute_by_path"]
        assert sum(by_path.values()) == pytest.approx(
            phase["bytes_per_client_minute"], abs=0.1 * len(by_path) + 0.1
        )
    assert "/3.0/taxiontheway" in written["phases"]["legacy"]["bytes_per_client_minute_by_path"]
    for phase in written["phases"].values():
        wire = phase["wire_bytes_per_client_minute"]
        # the bodies the app received as sent are today's figure; the headers are on top
        assert wire["response_body"] == pytest.approx(phase["bytes_per_client_minute"], abs=0.2)
        assert wire["gzip_headers"] > wire["gzip"] > 0
        assert wire["response_headers"] > 0 and wire["request_headers"] > 0
        assert set(phase["exchanges_per_client_minute"]) == set(
            phase["wire_bytes_per_client_minute_by_exchange"]
        )
        assert sum(phase["wire_bytes_per_client_minute_by_exchange"].values()) == pytest.approx(
            wire["gzip_headers"],
            abs=0.1 * len(phase["wire_bytes_per_client_minute_by_exchange"]) + 0.1,
        )
    for name in ("mlutp", "mlutp_wait"):
        assert (
            "/mlutp/v1/orders/state" in written["phases"][name]["bytes_per_client_minute_by_path"]
        )
    assert set(written["ratios_new_over_legacy"]) == {
        "heavy_calls_per_order_minute",
        "bytes_per_client_minute",
        "freshness_p95",
        "wait_heavy_calls_per_order_minute",
        "wait_bytes_per_client_minute",
        "wait_freshness_p95",
        # bytes both ways behind a gzipping gateway: as sent, gzipped, gzipped with headers
        "raw_bytes_per_client_minute",
        "gzip_bytes_per_client_minute",
        "gzip_headers_bytes_per_client_minute",
        "wait_raw_bytes_per_client_minute",
        "wait_gzip_bytes_per_client_minute",
        "wait_gzip_headers_bytes_per_client_minute",
        "redis_down_heavy_calls_per_order_minute",
        "wait_redis_down_heavy_calls_per_order_minute",
        # the worst 5-s window of each phase against the legacy rate
        "mlutp_peak_5s",
        "mlutp_wait_peak_5s",
        "mlutp_redis_down_peak_5s",
        "mlutp_wait_redis_down_peak_5s",
        # the slow part's own upstream's worst 5-s window, against the legacy totw rate
        "mlutp_performer_peak_5s",
        "mlutp_wait_performer_peak_5s",
        "mlutp_redis_down_performer_peak_5s",
        "mlutp_wait_redis_down_performer_peak_5s",
        # the busiest taxi part service's worst 5-s window, likewise
        "mlutp_part_service_peak_5s",
        "mlutp_wait_part_service_peak_5s",
        "mlutp_redis_down_part_service_peak_5s",
        "mlutp_wait_redis_down_part_service_peak_5s",
        # upstream cost in work (the emulator's priced fields), next to the part calls
        "work_per_order_minute",
        "wait_work_per_order_minute",
        "part_calls_per_order_minute",
        "wait_part_calls_per_order_minute",
    }
    # work beside calls: legacy's is totw's and the details', the new scheme's never totw's
    # (each taxi part from its own service); a phase's work is the sum of its upstreams'
    assert written["phases"]["legacy"]["work_per_order_minute"] > 0
    for name, phase in written["phases"].items():
        by_upstream = phase["work_per_order_minute_by_upstream"]
        assert sum(by_upstream.values()) == pytest.approx(
            phase["work_per_order_minute"], abs=0.1 * len(by_upstream) + 0.1
        )
        assert not any(target.startswith("source:") for target in by_upstream), name
        if name != "legacy":
            assert "totw" not in by_upstream, name
    # the waiting clients poll far less often than the plain ones
    phases = written["phases"]
    assert phases["mlutp_wait"]["polls_per_client_minute"] > 0
    # every legacy client polled its order at least once in 6 s: the ratios are numbers
    assert written["phases"]["legacy"]["heavy_calls"] > 0
    assert written["phases"]["legacy"]["peak_heavy_calls_per_order_minute"] > 0
    assert all(
        isinstance(v, float)
        for k, v in written["ratios_new_over_legacy"].items()
        if "freshness" not in k
    )
    for name in written["plots"]:
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
    out = capsys.readouterr().out
    assert "new / legacy heavy_calls_per_order_minute" in out
    assert "new / legacy wait_work_per_order_minute" in out and "upstream work/order-min" in out
    assert "src/cl-min" in out and "elsewhere p95" in out
    assert "bytes/client-min by request path" in out
    assert "new / legacy wait_gzip_headers_bytes_per_client_minute" in out
    assert "bytes/client-min both ways behind a gzip gateway" in out
    assert "mlutp_redis_down" in out


def test_the_peak_window_is_the_busiest_five_seconds_not_the_average() -> None:
    flat = [{"t": t, "heavy_calls": 2, "active_orders": 10} for t in range(20)]
    # 2 calls a second over 10 orders: 12 per order-minute, in every window alike
    assert peak_window_rate(flat) == 12.0
    burst = [dict(point) for point in flat]
    for point in burst[7:12]:
        point["heavy_calls"] = 6
    # the five seconds of the burst: 30 calls over 50 order-seconds
    assert peak_window_rate(burst) == 36.0
    # one window shorter than five seconds still counts
    assert peak_window_rate(flat[:3]) == 12.0


async def test_the_loadtest_runs_its_phases_over_replicas_on_a_redis_cluster(
    tmp_path: Path,
) -> None:
    config = LoadtestConfig(
        clients=4,
        duration_s=4,
        warmup_s=2,
        time_scale=30,
        out_dir=tmp_path,
        progress=False,
        replicas=2,
        redis_cluster=3,
    )
    report = await run_loadtest(config)
    assert set(report["phases"]) == {"legacy", "mlutp", "mlutp_wait"}
    for name in ("mlutp", "mlutp_wait"):
        phase = report["phases"][name]
        assert phase["server_errors"] == 0, name
        # the clients took both replicas in turn: each answered its share
        [first, second] = phase["requests_by_replica"]
        assert first > 0 and second > 0, name


def test_a_share_of_orders_is_created_elsewhere_the_same_ones_every_time() -> None:
    ids = [f"order-{index}" for index in range(4000)]
    assert not any(created_elsewhere(orderid, 0.0) for orderid in ids)
    assert all(created_elsewhere(orderid, 1.0) for orderid in ids)
    elsewhere = [orderid for orderid in ids if created_elsewhere(orderid, 0.3)]
    assert 0.25 < len(elsewhere) / len(ids) < 0.35
    assert elsewhere == [orderid for orderid in ids if created_elsewhere(orderid, 0.3)]

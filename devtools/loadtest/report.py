"""The report of a load test: each phase against legacy (ratios), the summary table, and
the plots (upstream load over time, freshness)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from client.wire_bytes import GZIP_LEVEL, GZIP_MIN_LENGTH
from devtools.loadtest.config import PhaseResult

# the sums of client.wire_bytes.wire_totals compared with legacy
WIRE_RATIOS = ("raw", "gzip", "gzip_headers")
# the costliest exchanges a phase's bytes table names
TOP_EXCHANGES = 6


def _ratio(new: float, legacy: float) -> float | None:
    """new ÷ legacy, or None when the legacy phase measured nothing to compare with."""
    return round(new / legacy, 3) if legacy > 0 else None


def ratios(phases: dict[str, PhaseResult]) -> dict[str, float | None]:
    legacy = phases["legacy"]
    result: dict[str, float | None] = {}
    for mode, prefix in (("mlutp", ""), ("mlutp_wait", "wait_")):
        if mode not in phases:
            continue
        new = phases[mode]
        result[f"{prefix}heavy_calls_per_order_minute"] = _ratio(
            new.heavy_calls_per_order_minute, legacy.heavy_calls_per_order_minute
        )
        # upstream cost in work (emulator/work.py), next to calls: a call of one part's own
        # service builds its fields, a legacy totw call every field of the order
        result[f"{prefix}work_per_order_minute"] = _ratio(
            new.work_per_order_minute, legacy.work_per_order_minute
        )
        result[f"{prefix}part_calls_per_order_minute"] = _ratio(
            new.part_calls_per_order_minute, legacy.part_calls_per_order_minute
        )
        result[f"{prefix}bytes_per_client_minute"] = _ratio(
            new.bytes_per_client_minute, legacy.bytes_per_client_minute
        )
        result[f"{prefix}freshness_p95"] = _ratio(new.freshness_s["p95"], legacy.freshness_s["p95"])
        # both ways, behind a gzipping gateway (client.wire_bytes): as sent, gzipped, and
        # gzipped with the header blocks (a 204's among them)
        for kind in WIRE_RATIOS:
            result[f"{prefix}{kind}_bytes_per_client_minute"] = _ratio(
                new.wire_bytes_per_client_minute.get(kind, 0.0),
                legacy.wire_bytes_per_client_minute.get(kind, 0.0),
            )
    for name in ("mlutp_redis_down", "mlutp_wait_redis_down"):
        if name in phases:
            result[f"{name.removeprefix('mlutp_')}_heavy_calls_per_order_minute"] = _ratio(
                phases[name].heavy_calls_per_order_minute, legacy.heavy_calls_per_order_minute
            )
    # every phase's worst 5-s window against the legacy rate: at most 1 at every moment
    for name, phase in phases.items():
        if name != "legacy":
            result[f"{name}_peak_5s"] = _ratio(
                phase.peak_heavy_calls_per_order_minute, legacy.heavy_calls_per_order_minute
            )
            # the slow part's own upstream: legacy asked it once per totw call
            result[f"{name}_performer_peak_5s"] = _ratio(
                phase.peak_performer_calls_per_order_minute, legacy.totw_calls_per_order_minute
            )
            # the busiest of every taxi part's own service, likewise
            result[f"{name}_part_service_peak_5s"] = _ratio(
                phase.peak_part_service_calls_per_order_minute, legacy.totw_calls_per_order_minute
            )
    return result


def _elsewhere_p95(phase: PhaseResult) -> str:
    """The freshness p95 of orders created on another device, with how many were seen."""
    if not phase.created_elsewhere_freshness_s:
        return ""
    return f"{phase.created_elsewhere_freshness_s['p95']:.2f} ({phase.created_elsewhere_measured})"


def summary_table(phases: dict[str, PhaseResult], ratio: dict[str, float | None]) -> str:
    header = (
        f"{'phase':<24}{'heavy/order-min':>16}{'bytes/client-min':>18}{'fresh p50':>11}"
        f"{'p95':>8}{'p99':>8}{'poll p50 ms':>13}{'p99 ms':>9}{'polls/cl-min':>14}"
        f"{'errors':>8}{'5xx':>6}{'peak 5s':>9}{'recovery s':>12}{'src/cl-min':>12}"
        f"{'elsewhere p95':>15}"
    )
    lines = [header, "-" * len(header)]
    for phase in phases.values():
        lines.append(
            f"{phase.name:<24}{phase.heavy_calls_per_order_minute:>16.2f}"
            f"{phase.bytes_per_client_minute:>18.0f}{phase.freshness_s['p50']:>11.2f}"
            f"{phase.freshness_s['p95']:>8.2f}{phase.freshness_s['p99']:>8.2f}"
            f"{phase.poll_latency_ms['p50']:>13.1f}{phase.poll_latency_ms['p99']:>9.1f}"
            f"{phase.polls_per_client_minute:>14.2f}{phase.errors:>8}"
            f"{phase.server_errors:>6}{phase.peak_heavy_calls_per_order_minute:>9.2f}"
            f"{'' if phase.recovery_s is None else f'{phase.recovery_s:.0f}':>12}"
            f"{phase.source_calls_per_client_minute:>12.2f}"
            f"{_elsewhere_p95(phase):>15}"
        )
    lines.append("")
    lines.append(
        "upstream work/order-min (emulator/work.py; part upstreams, totw, details) and part "
        "upstream calls/order-min, by upstream:"
    )
    for phase in phases.values():
        by_upstream = phase.work_per_order_minute_by_upstream.items()
        split = "  ".join(f"{target} {work:.0f}" for target, work in by_upstream)
        lines.append(
            f"  {phase.name:<22}work {phase.work_per_order_minute:.0f}  "
            f"calls {phase.part_calls_per_order_minute:.2f}  ({split})"
        )
    lines.append("")
    lines.append("bytes/client-min by request path:")
    for phase in phases.values():
        split = "  ".join(f"{p} {b:.0f}" for p, b in phase.bytes_per_client_minute_by_path.items())
        lines.append(f"  {phase.name:<22}{split}")
    lines.append("")
    lines.append(
        "order source calls/client-min by cause (first, list_changed, past_max_age: "
        "kept answer past its age, unchanged_early: asked again sooner with the same list tag):"
    )
    for phase in phases.values():
        split = "  ".join(
            f"{c} {n:.2f}" for c, n in phase.source_calls_per_client_minute_by_cause.items()
        )
        gap = phase.past_max_age_gap_s
        every = f"  (past_max_age every {gap['mean']:.0f} s, p95 {gap['p95']:.0f} s)" if gap else ""
        lines.append(f"  {phase.name:<22}{split}{every}")
    lines.append("")
    lines.extend(wire_table(phases))
    lines.append("")
    goals = {
        "heavy_calls_per_order_minute": "goal <= 0.2",
        "work_per_order_minute": "upstream work, beside calls",
        "wait_work_per_order_minute": "goal <= 0.08",
        "part_calls_per_order_minute": "every part upstream's calls, the services' too",
        "wait_part_calls_per_order_minute": "every part upstream's calls, the services' too",
        "bytes_per_client_minute": "goal <= 0.1",
        "freshness_p95": "goal <= 1.0",
        "wait_heavy_calls_per_order_minute": "goal <= the mlutp figure",
        "wait_bytes_per_client_minute": "goal <= 0.03",
        "gzip_headers_bytes_per_client_minute": "goal <= 0.2",
        "wait_gzip_headers_bytes_per_client_minute": "goal <= 0.1",
        "raw_bytes_per_client_minute": "bodies both ways as sent, beside gzip",
        "wait_raw_bytes_per_client_minute": "bodies both ways as sent, beside gzip",
        "gzip_bytes_per_client_minute": "bodies both ways gzipped, no headers",
        "wait_gzip_bytes_per_client_minute": "bodies both ways gzipped, no headers",
        "wait_freshness_p95": "absolute goal: p95 <= 1.0 s, p50 <= 0.3 s",
        "redis_down_heavy_calls_per_order_minute": "goal <= 1.0",
        "wait_redis_down_heavy_calls_per_order_minute": "goal <= 1.0",
    }
    for key, value in ratio.items():
        shown = f"{value:>7.3f}" if value is not None else "    n/a"
        goal = goals.get(key, "goal <= 1.0: the legacy rate, in the worst 5-s window")
        lines.append(f"new / legacy {key:<42} {shown}   ({goal})")
    return "\n".join(lines)


def wire_table(phases: dict[str, PhaseResult]) -> list[str]:
    """Bytes both ways per client-minute as they cross a mobile network behind a gateway
    gzipping at level GZIP_LEVEL, each phase's bodies and headers, and its costliest
    exchanges."""
    lines = [
        f"bytes/client-min both ways behind a gzip gateway (level {GZIP_LEVEL}, bodies from "
        f"{GZIP_MIN_LENGTH} B; headers as HTTP/1.1 text, a 204's too):",
        f"  {'phase':<22}{'raw bodies':>12}{'gzip bodies':>13}{'req headers':>13}"
        f"{'resp headers':>14}{'gzip+headers':>14}",
    ]
    for phase in phases.values():
        wire = phase.wire_bytes_per_client_minute
        lines.append(
            f"  {phase.name:<22}{wire.get('raw', 0):>12.0f}{wire.get('gzip', 0):>13.0f}"
            f"{wire.get('request_headers', 0):>13.0f}{wire.get('response_headers', 0):>14.0f}"
            f"{wire.get('gzip_headers', 0):>14.0f}"
        )
    lines.append(
        "  the costliest exchanges (path status: gzip+headers/client-min, exchanges/client-min):"
    )
    for phase in phases.values():
        top = list(phase.wire_bytes_per_client_minute_by_exchange.items())[:TOP_EXCHANGES]
        counts = phase.exchanges_per_client_minute
        lines.append(
            f"  {phase.name:<22}"
            + "  ".join(f"{e}: {b:.0f} B, {counts.get(e, 0):.2f}" for e, b in top)
        )
    return lines


def write_plots(phases: dict[str, PhaseResult], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def plot(name: str, title: str, xlabel: str, ylabel: str, draw: Callable[[Any], bool]) -> str:
        figure, axis = plt.subplots(figsize=(9, 4.5))
        if draw(axis):  # True when something labelled was drawn
            axis.legend()
        axis.set(title=title, xlabel=xlabel, ylabel=ylabel)
        figure.tight_layout()
        figure.savefig(out_dir / name, dpi=100)
        plt.close(figure)
        return name

    def upstream_load(axis: Any) -> bool:
        for phase in phases.values():
            xs = [p["t"] for p in phase.timeline]
            ys = [p["heavy_calls"] / max(p["active_orders"], 1) * 60 for p in phase.timeline]
            axis.plot(xs, ys, label=phase.name, linewidth=1)
        return bool(phases)

    def freshness(axis: Any) -> bool:
        drawn = [phase for phase in phases.values() if phase.freshness_points]
        for phase in drawn:
            axis.scatter(
                [at for at, _ in phase.freshness_points],
                [delay for _, delay in phase.freshness_points],
                s=4,
                alpha=0.5,
                label=phase.name,
            )
        return bool(drawn)

    return [
        plot(
            "upstream_load.png",
            "Upstream load (totw + details)",
            "seconds into the measured phase",
            "heavy upstream calls per order-minute",
            upstream_load,
        ),
        plot(
            "freshness.png",
            "Freshness",
            "time of the data change, seconds into the phase",
            "seconds until the client held it",
            freshness,
        ),
    ]

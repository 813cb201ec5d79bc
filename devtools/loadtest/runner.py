"""A load test from start to end: a stack of its own, the phases in order, the report."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from typing import Any

import aiohttp

from devtools.loadtest.config import LoadtestConfig, PhaseResult
from devtools.loadtest.phases import run_phase
from devtools.loadtest.report import ratios, summary_table, write_plots
from devtools.stack import Stack, free_ports_env


async def run_loadtest(config: LoadtestConfig) -> dict[str, Any]:
    from tqdm import tqdm

    env: dict[str, str] = dict(os.environ)
    env.pop("REDIS_URL", None)  # a Redis of its own, so that --fault redis harms nobody
    env.pop("REDIS_CLUSTER_NODES", None)
    env.update(free_ports_env())
    env.update(
        {
            "LOG_LEVEL": "ERROR",
            "EMULATOR_DRIVER_ENABLED": "true",
            "EMULATOR_DRIVER_POPULATION": str(config.clients),
            "EMULATOR_DRIVER_TIME_SCALE": str(config.time_scale),
        }
    )
    plan: list[tuple[str, str, str | None]] = [("legacy", "legacy", None)]
    if config.with_mlutp:
        plan.append(("mlutp", "mlutp", None))
    if config.with_wait:
        plan.append(("mlutp_wait", "mlutp_wait", None))
    for fault_name in config.faults:
        for mode in config.fault_modes:
            plan.append((f"{mode}_{fault_name.replace(':', '_')}_down", mode, fault_name))
    total = int(len(plan) * (config.warmup_s + config.duration_s))
    stack = Stack(env, replicas=config.replicas, redis_cluster_masters=config.redis_cluster)
    phases: dict[str, PhaseResult] = {}
    connector = aiohttp.TCPConnector(limit=0)
    with tqdm(total=total, unit="s", disable=not config.progress, file=sys.stderr) as bar:
        try:
            await stack.start()
            async with aiohttp.ClientSession(connector=connector) as session:
                for name, mode, fault in plan:
                    bar.set_description(name)
                    phases[name] = await run_phase(
                        name, mode, fault, stack, session, config, lambda: bar.update(1)
                    )
        finally:
            await stack.close()
    ratio = ratios(phases)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(phases, config.out_dir)
    report = {
        "config": {**asdict(config), "out_dir": str(config.out_dir)},
        "profile": "EMULATOR_DRIVER_* defaults (docs/development.md: The change profile)",
        "phases": {name: asdict(phase) for name, phase in phases.items()},
        "ratios_new_over_legacy": ratio,
        "plots": plots,
    }
    (config.out_dir / "report.json").write_text(json.dumps(report, indent=2))
    print(summary_table(phases, ratio))
    print(f"\nreport: {config.out_dir / 'report.json'}, plots: {', '.join(plots)}")
    return report

"""`mlutp loadtest`: N simulated clients against a stack of its own, in the legacy mode and in
the new scheme, one after the other on the same order population and change profile, then a
summary table and a report (JSON and PNG plots).

Measured per phase, after a warm-up:
- heavy upstream calls (totw, eats and grocery details) per active order-minute, from the
  emulator's stats; beside them every part upstream's calls (each taxi part's own service
  too) and the upstream work (emulator/work.py: every field of an order's data the part
  upstreams, totw and the details built; not the order sources) per active order-minute,
  the unit of upstream cost once each part comes from its own service;
- downlink bytes per client-minute (response bodies);
- bytes both ways per client-minute as they cross a mobile network behind a gateway
  (client.wire_bytes): bodies as sent (raw), gzipped at level 6 from 20 bytes on (nginx's
  `gzip_comp_level 6`, its `gzip_min_length` 20) on both sides, and gzipped with the request
  and response header blocks (a 204's too), new ÷ legacy for each;
- freshness: from a data change (the emulator's record) to the client holding that version;
- poll latency (orders/state in the new scheme, the document call in the legacy one);
- errors.
- the peak of heavy calls in any 5-s window, next to the legacy rate: the bound holds at
  every moment, not only on average.

`--fault F` adds phases of the new scheme with a fault for the middle half of the measured
time, so that its start, its middle and its end are all measured: `redis` (killed, then
started again empty), `redis_stop` (SIGSTOP, then SIGCONT), `redis_pause` (CLIENT PAUSE),
`order_core` (fast_info's own upstream answering 500), `source:eats` (down). Its recovery
time is from the fault's end to the first second in which orders_state saw no failure (tag
cache, sources, part upstreams).


The package, one job a module: `config` (what to run, what a phase measured), `faults` (each
fault an object that starts and ends itself), `measure` (reading the stack: stats, metrics,
freshness, windows), `phases` (one phase of simulated clients), `report` (ratios, table,
plots), `runner` (the stack and the phases in order), `cli` (`mlutp loadtest`).
"""

from __future__ import annotations

from devtools.loadtest.config import HEAVY_TARGETS, LoadtestConfig, PhaseResult
from devtools.loadtest.faults import FAULTS
from devtools.loadtest.measure import peak_window_rate
from devtools.loadtest.runner import run_loadtest

__all__ = [
    "FAULTS",
    "HEAVY_TARGETS",
    "LoadtestConfig",
    "PhaseResult",
    "peak_window_rate",
    "run_loadtest",
]

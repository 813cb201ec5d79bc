"""Admission control (docs/protocol.md: Polling interval): past a hard cap of polls in progress per
process, a poll is answered at once with 503 and Retry-After, so admitted polls stay fast
and never answer "source unavailable" because of the BFF's own queue.

The cap is what the process clears within its latency budget: a fixed number is either far
above what one process serves (and polls queue in its event loop past the sources' deadlines)
or below what a bigger machine serves, and a cap that follows the event loop's lag sheds the
very bursts an idle process clears at once (a burst lags the loop by design). So the cap is
the budget over the measured CPU cost of one look; the calls of admitted polls get the
process's own queue added to their deadlines, so a burst it chose to admit does not time out
on itself and open its circuits.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# a look never costs less than this (a window of cheap looks cannot make the cap unbounded)
MIN_LOOK_COST_MS = 0.05


def admitted(in_flight: int, max_in_flight: int) -> bool:
    """Whether one more poll may start while `in_flight` are in progress."""
    return in_flight < max_in_flight


def retry_after_s(base_s: int, rng: random.Random) -> int:
    """Retry-After in whole seconds (as HTTP has it): from `base_s` to twice it, so clients
    shed together do not all come back in the same second."""
    return rng.randint(base_s, 2 * base_s)


@dataclass
class BudgetLimit:
    """The cap of polls in progress: as many looks as the process clears within its latency
    budget, `budget_ms / look_cost_ms`, between `min_limit` and `max_limit`.

    - A look's cost is the process's CPU time per look, measured over windows with at least
      `min_looks` looks, less what the process spends idle (timers, metrics) in as long, and
      smoothed (an exponential average) so that one garbage-collector pause does not halve
      the cap. A window with fewer looks says too little and moves nothing.
    - An idle or warm process admits at once the burst it clears in its budget: the cap does
      not start at a floor and climb.
    - Waiting on an upstream costs no CPU, so a slow source never shrinks the cap (that is the
      breakers' work).
    - Under lasting overload the loop's other work (reading and refusing requests, and each
      look's turns waiting behind the others) takes its share, which the CPU cost cannot see:
      while the smoothed lag of the event loop stays above `lag_target_ms`, the cap's share
      `lag_scale` keeps shrinking a little each sample, and below it grows back. A share set
      in proportion (target / lag) would settle with the lag above the target; one that
      moves while the lag is off target settles at it.
    """

    # the cap's floor: a process whose measured look cost is inflated (a noisy neighbour's CPU)
    # still admits polls
    min_limit: int = 20
    # the ceiling (MLUTP_MAX_POLLS_IN_FLIGHT): past it a poll is a 503 at once
    max_limit: int = 2000
    # a quarter of a second of queue: well inside a poll's deadlines and a client's timeout
    budget_ms: float = 250.0
    # the estimate before any window measured one (a cold process): between a plain poll's
    # and a re-ask's (docs/capacity.md: The measured figures)
    look_cost_ms: float = 0.5
    # the lag that may last, small beside a poll's deadlines: above it the cap shrinks in
    # proportion
    lag_target_ms: float = 10.0
    smoothing: float = 0.3
    # a tenth of each lag sample (10 ms apart): a burst's lag passes, a lasting one shows
    lag_smoothing: float = 0.1
    # how far one lag sample moves the share: (target / lag) ** gain, a sample each ~10 ms
    lag_gain: float = 0.05
    min_lag_scale: float = 0.02
    min_looks: int = 20
    lag_ms: float = field(init=False, default=0.0)
    lag_scale: float = field(init=False, default=1.0)
    # the CPU share of a window with no looks: the process's own idle work
    idle_cpu_share: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.min_limit = max(1, min(self.min_limit, self.max_limit))
        self.look_cost_ms = max(MIN_LOOK_COST_MS, self.look_cost_ms)

    @property
    def cap(self) -> int:
        fits = self.budget_ms / self.look_cost_ms * self.lag_scale
        return max(self.min_limit, min(self.max_limit, int(fits)))

    def observe_lag(self, lag_ms: float) -> int:
        """One sample of the event loop's lag (how late a timer fired), smoothed: a burst the
        process admitted lags it for a moment and is gone; a lag that stays is a process
        short of time for what it admits, and the cap's share shrinks until it is gone. Back
        under the target the share grows again, at most 2 ** gain a sample."""
        self.lag_ms += self.lag_smoothing * (max(0.0, lag_ms) - self.lag_ms)
        off_target = self.lag_target_ms / max(self.lag_ms, self.lag_target_ms / 2)
        scale = self.lag_scale * off_target**self.lag_gain
        self.lag_scale = min(1.0, max(self.min_lag_scale, scale))
        return self.cap

    def observe(self, *, cpu_ms: float, wall_ms: float, looks: int, idle: bool) -> int:
        """One window: the CPU the process used, how long it lasted, the looks it finished,
        and whether it was `idle` (no look in progress at any moment of it). A window of an
        overloaded process in which no look happened to finish is not idle: taking its CPU
        for the process's idle work would charge the looks a fraction of their cost, and
        the cap would admit several times what the process clears in its budget."""
        if idle and wall_ms > 0:
            share = min(1.0, max(0.0, cpu_ms / wall_ms))
            self.idle_cpu_share += self.smoothing * (share - self.idle_cpu_share)
        elif looks >= self.min_looks:
            sample = max(0.0, cpu_ms - self.idle_cpu_share * wall_ms) / looks
            cost = self.look_cost_ms + self.smoothing * (sample - self.look_cost_ms)
            self.look_cost_ms = max(MIN_LOOK_COST_MS, cost)
        return self.cap

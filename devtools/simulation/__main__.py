"""`python -m devtools.simulation`: replay a seed with its whole report, or explore many.

python -m devtools.simulation --seed 17            # one run, its report
python -m devtools.simulation --seeds 1000         # seeds 1..1000, a summary
python -m devtools.simulation --seeds 500 --from 10001 --workers 2
python -m devtools.simulation --seeds 100 --no-watch-cache   # every waiting poll looks
"""

from __future__ import annotations

import argparse
import sys

from devtools.simulation.explore import default_workers, explore
from devtools.simulation.options import Options
from devtools.simulation.run import run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.simulation", description=__doc__)
    parser.add_argument("--seed", type=int, help="run this seed and print its report")
    parser.add_argument("--seeds", type=int, default=200, help="how many seeds to explore")
    parser.add_argument("--from", dest="first", type=int, default=1, help="the first seed")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument(
        "--untagged-replicas",
        action="store_true",
        help="lagging replicas answer no list tag for data they have none for (a known failure)",
    )
    parser.add_argument(
        "--at-once-after-expired",
        action="store_true",
        help="clients poll again at once after an expired part, as the reference client (a "
        "known failure)",
    )
    parser.add_argument(
        "--watch-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="waiting re-polls held from their client's last look (on by default, as in the "
        "services; --no-watch-cache: every waiting poll looks)",
    )
    parser.add_argument(
        "--spraying-router",
        action="store_true",
        help="the balancer sprays requests over the replicas instead of routing by user",
    )
    parser.add_argument(
        "--lossy-writers",
        action="store_true",
        help="a writer drops a tag write that failed instead of retrying it until it lands",
    )
    args = parser.parse_args(argv)
    options = Options(
        untagged_replicas=args.untagged_replicas,
        at_once_after_expired=args.at_once_after_expired,
        watch_cache=args.watch_cache,
        spraying_router=args.spraying_router,
        lossy_writers=args.lossy_writers,
    )
    if args.seed is not None:
        report = run_seed(args.seed, options=options)
        print(report.describe())
        return 0 if report.ok else 1
    exploration = explore(
        range(args.first, args.first + args.seeds), workers=args.workers, options=options
    )
    for failed in exploration.failed[:1]:
        print(failed.report)
        print()
    print(exploration.summary())
    return 0 if not exploration.failed else 1


if __name__ == "__main__":
    sys.exit(main())

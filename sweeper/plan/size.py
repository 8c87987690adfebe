"""The one bound on a sweep's size: sweeper.max_runs (its default: sweeper.config.schema.SweeperConf).

    check_size(sweep, {"rope": 4, "nope": 4})    # UsageError when 8 > sweep.sweeper.max_runs

Every plan passes here before a seed list is built (sweeper.plan.make.make_plan counts Seeds, so seeds=0-10**12
is refused without building it), and so does an adaptive sweep's largest plan (sweeper.adaptive.driver). One
message, one line, exit status 2 through sweeper.cli.boundary.
"""
from __future__ import annotations

from sweeper.config.sweep import Sweep
from sweeper.errors import UsageError


def check_size(sweep: Sweep, per_variant: dict[str, int]) -> None:
    """Refuse a plan of more than sweeper.max_runs runs (per_variant: variant -> its number of seeds)."""
    limit, total = sweep.sweeper.max_runs, sum(per_variant.values())
    if total > limit:
        counts = set(per_variant.values())
        shape = (f"{len(per_variant)} variants x {counts.pop()} seeds" if len(counts) == 1
                 else " + ".join(f"{v}: {n}" for v, n in per_variant.items()))
        raise UsageError(f"the plan has {total} runs ({shape}), more than sweeper.max_runs={limit}; ask for fewer "
                         f"seeds (e.g. seeds=0-3) or variants, or raise the limit with sweeper.max_runs={total}")

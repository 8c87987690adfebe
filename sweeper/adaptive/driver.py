"""`python -m sweeper +experiment=NAME seeds=adaptive [sweeper.adaptive.start=3 .batch=2 .max_seeds=9]`: the
adaptive driver. Each look plans the seeds still needed, launches them through the sweep's backend, waits,
analyses and decides (sweeper.adaptive); the looks are recorded in the sweep dir (sweeper.plan.looks).

    python -m sweeper +experiment=rope seeds=adaptive experiment.min_effect=0.02 sweeper.adaptive.max_seeds=8
    python -m sweeper +experiment=rope seeds=adaptive ... launcher=slurm     # each look: a new job array

Look k runs seeds 0..n_k-1 of every comparison still open and of the baseline (while any comparison is open):
pairing by seed is kept, a decided or stopped variant keeps the seeds it ran. The local pool starts runs as its
slots free; a look waits only for its own runs. Failed and diverged runs count against their arm (the fixed
design's tests); a health-failed variant is stopped as "invalid" at its first look. Ctrl-C: every finished run
and every recorded look is kept; the same command resumes at the look it was in. experiment.min_effect is
required (futility needs the smallest effect that matters); launcher=slurm needs launcher.wait=true.
"""
from __future__ import annotations

import dataclasses
import sys

from sweeper.adaptive import design as adaptive
from sweeper.backends.progress import Progress
from sweeper.errors import UsageError
from sweeper.execute.end import finish
from sweeper.execute.launch import PreflightRefused, fix_launch, launch_plan
from sweeper.plan.lock import sweep_lock
from sweeper.plan.looks import looks_path, read_looks, write_looks
from sweeper.plan.make import make_plan, reconcile
from sweeper.plan.paths import check_paths
from sweeper.plan.size import check_size
from sweeper.run.files.reading import UnreadableFile

LOOK_MIN_SEEDS = 2     # a look's analysis: arms with 2 seeds are read (sweeper.adaptive.start may be 2); the look
LOOK_RESAMPLES = 200   # the arms' analysis only: the look's test runs as calibrated (sweeper.adaptive.calibration)


def design_of(sweep) -> adaptive.Design:
    """The Design from sweeper.adaptive.* and the experiment; UsageError (one line) for what it refuses."""
    conf, decision = sweep.sweeper.adaptive, sweep.sweeper.decision
    exp = sweep.experiment
    if exp.min_effect is None:
        raise UsageError("seeds=adaptive needs experiment.min_effect (the smallest difference that matters, in "
                         f"{exp.metric} units, > 0): futility stops are judged against it; add e.g. "
                         "experiment.min_effect=0.01")
    if len(exp.variants) < 2 or not exp.baseline:
        raise UsageError("seeds=adaptive needs a baseline and at least one other variant to compare with it")
    own = [v for v, s in sweep.variant_seeds.items() if s is not None]
    if own:
        raise UsageError(f"seeds=adaptive: variant {own[0]} sets its own seeds=; adaptive looks choose the seeds "
                         f"of every variant (remove its seeds= override)")
    return adaptive.Design(alpha=decision.alpha, start=conf.start, batch=conf.batch, max_seeds=conf.max_seeds,
                           min_effect=float(exp.min_effect), spending=conf.spending,
                           lower_is_better=bool(exp.lower_is_better))


class AdaptiveSweep:
    """What sweeper.cli.sweep.prepare returns for seeds=adaptive; its run() is the sweep."""
    adaptive = True              # what the command checks (it imports this module only for seeds=adaptive)

    def __init__(self, sweep, design: adaptive.Design):
        self.sweep, self.design = sweep, design
        self.variants = [v for v in sweep.experiment.variants if v != sweep.experiment.baseline]

    def plan_for(self, seeds: dict[str, int]):
        """The plan with seeds 0..n-1 per variant (n from `seeds`), merged with what the sweep dir records."""
        base = seeds[self.sweep.experiment.baseline]
        plan = make_plan(self.sweep, list(range(base)),
                         {v: list(range(n)) for v, n in seeds.items() if n != base})
        return reconcile(plan, extend=True)

    def run(self, backend, conf, argv: list[str], state: dict) -> int:
        """Look after look until every comparison is decided: each look is one launch of the plan so far
        (sweeper.execute.launch, the path of every sweep), then the report; the exit status of any sweep."""
        if not backend.waits(conf):
            raise UsageError("seeds=adaptive with launcher.wait=false: each look needs its runs' results before "
                             "the next one is planned; use launcher.wait=true")
        for w in self.sweep.warnings:
            print(f"sweeper: warning: {w}", file=sys.stderr)
        d = self.design
        first = self.plan_for({v: d.start for v in [self.sweep.experiment.baseline, *self.variants]})
        if self.sweep.sweeper.dry_run:
            print(f"adaptive sweep dir: {first.sweep_dir}\nlooks at {d.schedule()} seeds per arm (batch {d.batch}, "
                  f"max_seeds {d.max_seeds}), alpha {d.alpha} over {len(self.variants)} comparison(s), "
                  f"{d.spending} spending, min_effect {d.min_effect}\ndry run: nothing launched")
            return 0
        sweep_dir, statuses = first.sweep_dir, {}
        with sweep_lock(sweep_dir):
            record, states = self._load(sweep_dir)
            looked = len(record["looks"])
            while adaptive.still_open(states):
                seeds = self.seeds_next(states)
                plan = fix_launch(self.plan_for(seeds), backend, conf)
                progress = Progress(total=len(plan.runs), metric=plan.experiment.metric)
                progress.log(f"adaptive look {looked + 1}: {self._seeds_line(seeds)} "
                             f"({len(plan.runs)} runs planned so far)")
                try:
                    with progress.ticking():     # the clock moves while a preflight or a warm start blocks
                        statuses = launch_plan(plan, backend, conf, argv, progress, state, preflight=looked == 0)
                except PreflightRefused as e:
                    print(f"sweeper: error: {e}", file=sys.stderr)
                    return 1
                self.look(sweep_dir, states, seeds)
                looked += 1
                record = self.record(states, record, seeds)
                write_looks(sweep_dir, record)
                for v in self.variants:
                    progress.log(f"  {v} vs {self.sweep.experiment.baseline}: {states[v].status}"
                                 + (f" ({states[v].reason})" if states[v].reason else ""))
        return finish(sweep_dir, self.sweep.sweeper, statuses or {})

    def _load(self, sweep_dir):
        d = self.design
        try:
            record = read_looks(sweep_dir)
        except UnreadableFile as e:
            raise UsageError(str(e)) from None
        if record is None:
            return {"design": d.to_dict(), "calibration": adaptive.CALIBRATION,
                    "baseline": self.sweep.experiment.baseline, "looks": [], "states": {}}, \
                adaptive.start_states(d, self.variants)
        if record["design"] != d.to_dict():
            changed = [f"{k} {record['design'].get(k)} -> {v}" for k, v in d.to_dict().items()
                       if record["design"].get(k) != v]
            raise UsageError(f"{sweep_dir} holds adaptive looks made with another design ({', '.join(changed)}); "
                             f"repeat the recorded settings to resume, or use another sweeper.dir")
        if record.get("calibration") != adaptive.CALIBRATION:
            raise UsageError(f"{looks_path(sweep_dir)} holds looks decided with the levels of an older sweeper "
                             f"(the t-test's); delete that file to restart the looks with this version's "
                             f"(finished runs are kept), or use another sweeper.dir")
        states = {}
        for v in self.variants:
            s = record["states"].get(v)
            if s is None:
                raise UsageError(f"{sweep_dir}: its looks record has no comparison {v}; use another sweeper.dir")
            try:
                states[v] = adaptive.State(v, float(s["alpha"]), str(s["status"]), s["reason"], list(s["looks"]))
            except (KeyError, TypeError, ValueError) as e:
                raise UsageError(f"{looks_path(sweep_dir)}: comparison {v} is damaged ({type(e).__name__}: {e}); "
                                 f"delete the file to restart the adaptive looks (finished runs are kept)") from None
        return record, states

    def seeds_next(self, states) -> dict[str, int]:
        """Seeds per arm for the next look: open comparisons advance by batch (start at the first look)."""
        d = self.design
        seeds = {}
        for v, s in states.items():
            seeds[v] = (d.next_n(s.n) if s.looks else d.start) if s.status == adaptive.OPEN else s.n
        base = self.sweep.experiment.baseline
        seeds[base] = max([seeds[v] for v, s in states.items() if s.status == adaptive.OPEN] + [0])
        seeds[base] = max(seeds[base], max(seeds.values()))
        return seeds

    def _seeds_line(self, seeds) -> str:
        return ", ".join(f"{v} {n}" for v, n in seeds.items())

    def look(self, sweep_dir, states, seeds) -> None:
        """Analyse this look's runs and decide every open comparison (states updated in place)."""
        import sweeper.analysis.verdict as verdict  # deferred: pandas and scipy (about 1 s), at the first look
        from sweeper.analysis.results import load_manifest, load_runs  # deferred: pandas, as above
        exp = self.sweep.experiment
        live = adaptive.still_open(states)
        try:
            runs = load_runs(sweep_dir, load_manifest(sweep_dir))
        except UnreadableFile as e:
            raise UsageError(str(e)) from None
        runs = runs[runs["variant"].isin(live + [exp.baseline]) & (runs["seed"] < seeds[exp.baseline])]
        options = dataclasses.replace(self.sweep.sweeper.decision, min_seeds=LOOK_MIN_SEEDS,
                                      n_resamples=LOOK_RESAMPLES)
        an = verdict.analyze(runs, exp.metric, exp.lower_is_better, [(v, exp.baseline) for v in live], options)
        looks, invalid = {}, {}
        base = an.arms[exp.baseline]
        for c in an.comparisons:
            va = an.arms[c.variant]
            if base.health_failed or va.health_failed:
                invalid[c.variant] = ", ".join(base.health_failed or va.health_failed)
            if va.ended < 2 or base.ended < 2:
                looks[c.variant] = adaptive.LookStat(min(va.ended, base.ended), "insufficient", 1.0, float("nan"),
                                                     design=c.design)
                continue
            level = adaptive.next_level(self.design, states[c.variant], min(va.ended, base.ended),
                                        paired=c.design == "paired")
            if c.design == "paired":
                common = sorted(set(va.seeds.tolist()) & set(base.seeds.tolist()))
                a = va.values[[va.seeds.tolist().index(s) for s in common]]
                b = base.values[[base.seeds.tolist().index(s) for s in common]]
                looks[c.variant] = adaptive.look_stat("paired", a, b, level=level)
            else:
                looks[c.variant] = adaptive.look_stat("independent", va.values, base.values, va.lost, base.lost,
                                                      exp.lower_is_better, level=level)
        adaptive.decide_look(self.design, states, looks, invalid,
                             last=seeds[exp.baseline] >= self.design.max_seeds)

    def record(self, states, record, seeds) -> dict:
        record = dict(record)
        record["looks"] = list(record["looks"]) + [{"look": len(record["looks"]) + 1, "seeds": dict(seeds)}]
        record["states"] = {v: {"alpha": s.alpha, "status": s.status, "reason": s.reason, "looks": s.looks}
                            for v, s in states.items()}
        record["fixed_runs"] = adaptive.fixed_design_runs(self.design, len(self.variants))
        return record


def prepare_adaptive(sweep, backend, conf) -> AdaptiveSweep:
    """sweeper.cli.sweep.prepare for seeds=adaptive: the AdaptiveSweep, every check that starts nothing done
    (the design, the plan's size, a launcher that waits, the first look's plan against the sweep dir and its
    recorded looks, the paths it writes); the caller then starts the task's and the backend's probes."""
    design = design_of(sweep)
    check_size(sweep, {v: design.max_seeds for v in sweep.variant_configs})
    adaptive_sweep = AdaptiveSweep(sweep, design)
    if not backend.waits(conf):
        raise UsageError("seeds=adaptive with launcher.wait=false: each look needs its runs' results before "
                         "the next one is planned; use launcher.wait=true")
    # before its dir is read
    check_paths(make_plan(sweep, list(range(design.start))), writable=not sweep.sweeper.dry_run)
    first = adaptive_sweep.plan_for({v: design.start for v in [sweep.experiment.baseline, *adaptive_sweep.variants]})
    adaptive_sweep._load(first.sweep_dir)  # looks recorded with another design: refused here
    return adaptive_sweep

"""Adaptive seeds: the group-sequential decision engine (several variants vs one baseline, error control across
looks and comparisons). Pure numpy/scipy on per-seed arrays; no I/O, no backend, no torch.

    from sweeper.adaptive.design import Design, start_states, look_stat, decide_look
    d = Design(alpha=0.05, start=3, batch=2, max_seeds=9, min_effect=0.01, spending="obf", lower_is_better=True)
    states = start_states(d, ["nope", "frozen"])          # name -> State (open, alpha/m each)
    stats_ = {"nope": look_stat("paired", a, b)}          # one LookStat per open comparison at this look
    decide_look(d, states, stats_, invalid={"frozen": "gradient_flow"})   # states updated in place
    d.schedule()                                         # [3, 5, 7, 9]: seeds per arm at each look

Procedure (fixed before looking; docs/adaptive.md justifies it):
1. Looks at n = start, start+batch, ... , max_seeds seeds per arm; information fraction t = n / max_seeds (the
   seeds that ended, lost ones included, so a look whose runs were cut short is placed where it really is).
2. Each comparison spends its local level alpha_i over its looks by a Lan-DeMets spending function:
   O'Brien-Fleming type alpha(t) = 2 - 2 Phi(z_{alpha/2} / sqrt t), Pocock type alpha ln(1 + (e-1) t), or
   Hwang-Shih-DeCani alpha (1 - e^{-g t}) / (1 - e^{-g}) with g = HSD_GAMMA = -6 ("hsd": less than OBF spent
   before the last look, so the final level stays near alpha: 0.043 at looks 4, 6, ..., 16, OBF's 0.032).
3. A look's statistic is the fixed design's own test (sweeper.analysis.robust's robust permutation test, or the
   t-test where the permutation test's discrete p-values cannot spend the look's alpha; the exact worst-rank
   test when seeds were lost) and crosses when its two-sided p-value <= q_k. The levels q_k, and which of the two
   tests decides each look, are calibrated on that test's own p-values (look_levels: the calibration paths of
   sweeper.adaptive.calibration, PATHS normal null sweeps per design, fixed seed; the permutation test's
   p-values are stored there for up to MAX_N = 16 seeds per arm; beyond, its looks use levels calibrated on the
   t-test's p-values of the same paths):
   P(no crossing before k, p_k <= q_k) <= s (alpha(t_k) - alpha(t_{k-1})) under the null, s = CALIBRATION_SHARE
   = 0.96 (a margin: the simulated family-wise error sits at ~0.048, not at 0.05 +- noise), with what a
   discrete look cannot spend carried to the next. The robust test decides a look when it can spend its share,
   else the t-test (early looks spend less than the permutation floor 2 / 2^n). The normal-theory boundaries of
   a Brownian motion (`boundaries`, Armitage-McPherson-Rowe recursion) applied to t p-values let the error
   reach ~0.055 at alpha 0.05 (the looks share their variance estimates), so they are not used to decide.
   The permutation tests are exact under any noise law at each look; benchmarks/adaptive_sim.py checks the
   family-wise error across looks under normal and heavy-tailed noise.
4. Across comparisons: Holm as a graphical procedure (Maurer & Bretz 2013): alpha_i = alpha / m at first; when
   a comparison crosses (at this look or, at its updated level, at an earlier one) it is decided and its
   alpha_i is split equally among the comparisons not yet decided, whose levels are recomputed at their new
   alpha_i. Comparisons stopped for futility or invalid keep their share (never passed on: stopping for
   futility is non-binding, so it cannot raise the error).
5. Futility (needs experiment.min_effect = X), from the second look on (the first look's spread rests on
   start - 1 df), before max_seeds: a comparison stops when either
   a. conditional power under X is below FUTILITY_POWER: even if the true difference were X, the chance of
      crossing the final level by max_seeds is that small (z scale: the t statistic when the t-test decides
      the look; else the z of the deciding test's p-value, with the se on that test's scale: of the values
      clipped as the robust test clips them (robust.spread), Welch's se of the usable values for the
      worst-rank test), or
   b. predictive power is below PREDICTIVE_POWER: the chance of a final crossing, averaging over the effect
      given the data (flat prior: final Z ~ N(z / sqrt t, (1 - t) / t)), is that small.
   It is labelled "no effect >= X" when its 90% t interval lies inside (-X, X), else "inconclusive at
   budget". A 90% interval inside (-X, X) alone no longer stops a comparison early: at 4-8 seeds it stopped
   true effects of X/2 that the fixed design at max_seeds detects (the benchmark's main loss of power).
   At max_seeds an undecided comparison is "no effect >= X" when its 90% interval lies inside (-X, X), else
   "inconclusive at budget".
6. A health-failed variant (or baseline) is stopped at its first look: "invalid".
"""
from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import optimize
from scipy import stats as sps

import sweeper.analysis.robust as robust
import sweeper.analysis.stats as stats
from sweeper.adaptive import calibration

SPENDING = ("obf", "pocock", "hsd")
HSD_GAMMA = -6.0          # Hwang-Shih-DeCani spending parameter of spending="hsd"
OPEN, BETTER, WORSE, NO_EFFECT, BUDGET, INVALID = ("open", "better", "worse", "no effect", "inconclusive at budget",
                                                  "invalid")
FUTILITY_POWER = 0.05     # conditional power under min_effect below which a comparison stops as futile
PREDICTIVE_POWER = 0.05   # predictive power (the data's own trend) below which a comparison stops as futile
EQUIVALENCE = 0.90        # the interval that must lie inside (-min_effect, min_effect) for "no effect >= X"
CALIBRATION = "deciding test, calibration.npz"   # what the levels were calibrated on (recorded with the looks)
CALIBRATION_SHARE = 0.96      # the levels spend this share of alpha(t) on normal data: a margin (0.002 at alpha
                              # 0.05) for what the calibration cannot see (its own Monte Carlo error, noise laws
                              # between normal and heavy tails, looks placed off schedule); costs ~0.4 points
                              # of power (benchmarks/adaptive_sim.py)
_GRID = 241               # points per look of the numerical integration


@dataclass(frozen=True)
class Design:
    """One adaptive sweep's design, every field given by its maker (sweeper.adaptive.driver.design_of: the
    sweep's sweeper.adaptive.* (AdaptiveConf, where the defaults live), sweeper.decision.alpha, the experiment's
    min_effect and direction): no default here, so none is stated twice."""
    alpha: float
    start: int
    batch: int
    max_seeds: int
    min_effect: float
    spending: str
    lower_is_better: bool

    def schedule(self) -> list[int]:
        """Seeds per arm at each planned look: start, start+batch, ..., max_seeds."""
        n, out = self.start, []
        while n < self.max_seeds:
            out.append(n)
            n += self.batch
        return out + [self.max_seeds]

    def next_n(self, n: int) -> int:
        return min(n + self.batch, self.max_seeds)

    def to_dict(self) -> dict:
        return asdict(self)


def spent(t: float, alpha: float, kind: str = "obf") -> float:
    """Alpha spent (two-sided) by information fraction t in [0, 1]."""
    t = min(max(float(t), 0.0), 1.0)
    if t == 0:
        return 0.0
    if kind == "obf":
        return float(math.erfc(_z(alpha / 2) / math.sqrt(t) / _SQRT2))
    if kind == "hsd":
        return float(alpha * (1 - math.exp(-HSD_GAMMA * t)) / (1 - math.exp(-HSD_GAMMA)))
    if kind == "pocock":
        return float(alpha * math.log(1 + (math.e - 1) * t))
    raise ValueError(f"spending={kind!r}: accepted values are {', '.join(SPENDING)}")


@functools.lru_cache(maxsize=4096)
def boundaries(fractions: tuple[float, ...], alpha: float, kind: str = "obf") -> tuple[float, ...]:
    """Two-sided z boundaries c_1..c_K at the information fractions (increasing, in (0, 1]) spending `alpha`."""
    out: list[float] = []
    grid, dens = None, None          # continuation region on the S = Z sqrt(t) scale, its sub-density
    prev_t, prev_spent = 0.0, 0.0
    for t in fractions:
        target = spent(t, alpha, kind) - prev_spent
        dt = t - prev_t
        if dt <= 0:
            raise ValueError(f"information fractions must increase: {fractions}")

        def exit_prob(c: float) -> float:
            h = c * math.sqrt(t)
            if grid is None:
                return float(2 * sps.norm.sf(h / math.sqrt(dt)))
            sd = math.sqrt(dt)
            p = sps.norm.sf((h - grid) / sd) + sps.norm.cdf((-h - grid) / sd)
            return float(np.trapezoid(dens * p, grid))

        if target <= 1e-15:
            c = 40.0
        else:
            top = exit_prob(0.0)
            c = 0.0 if target >= top else optimize.brentq(lambda c: exit_prob(c) - target, 0.0, 40.0, xtol=1e-10)
        out.append(c)
        h = c * math.sqrt(t)
        new = np.linspace(-h, h, _GRID) if h > 0 else np.zeros(1)
        sd = math.sqrt(dt)
        if grid is None:
            new_dens = sps.norm.pdf(new / sd) / sd
        else:
            kern = sps.norm.pdf((new[:, None] - grid[None, :]) / sd) / sd          # (new, old)
            new_dens = np.trapezoid(kern * dens[None, :], grid, axis=1)
        grid, dens = new, new_dens
        prev_t, prev_spent = t, prev_spent + target
    return tuple(out)


def nominal_p(c: float) -> float:
    """The two-sided nominal p-value of a z boundary."""
    return float(math.erfc(c / _SQRT2))


_SQRT2 = math.sqrt(2.0)


@functools.lru_cache(maxsize=256)
def _z(p: float) -> float:
    """The upper p quantile of the standard normal."""
    return float(sps.norm.isf(p))


@dataclass(frozen=True)
class Level:
    """One look's calibrated decision rule: cross when the p-value of the test named by `robust` is <= q."""
    q: float
    robust: bool          # True: the robust permutation test decides this look; False: the t-test


@functools.lru_cache(maxsize=4096)
def look_levels(paired: bool, ns: tuple[int, ...], fractions: tuple[float, ...], alpha: float,
                kind: str = "obf") -> tuple[Level, ...]:
    """The levels of looks at ns seeds per arm (information fractions `fractions`): for each look, the test
    that decides it and its two-sided p threshold q_k, such that on the calibration paths (normal null sweeps,
    sweeper.adaptive.calibration) P(no crossing before k, p_k <= q_k) is the most that does not exceed
    CALIBRATION_SHARE (alpha(t_k) - alpha(t_{k-1})) plus what earlier looks could not spend. The robust
    permutation test decides where its discrete p-values can spend some of that, else the t-test. Beyond
    calibration.MAX_N seeds per arm no robust p-values are stored: the robust test decides (its floor is far
    below any level there) at the level calibrated on the t-test's p-values of the same paths (under normal
    noise the two tests' p-values differ by a few percent at that n)."""
    if len(ns) != len(fractions):
        raise ValueError(f"{len(ns)} looks but {len(fractions)} information fractions")
    paths = calibration.PATHS
    alive = np.ones(paths, dtype=bool)
    out, crossed = [], 0
    for n, t in zip(ns, fractions):
        want = int(round(spent(t, alpha, kind) * CALIBRATION_SHARE * paths)) - crossed   # this look may add
        if n < 2 or want <= 0:
            out.append(Level(0.0, False))
            continue
        level, p = None, None
        if n <= calibration.MAX_N:
            p = calibration.pvalues(paired, n, robust=True)
            level = _spending_level(p[alive], want, robust=True)
        if level is None:       # the t-test's p-values: beyond MAX_N (the robust test decides, calibrated on
            p = calibration.pvalues(paired, n, robust=False)      # them), or where the floor spends too much
            level = _spending_level(p[alive], want, robust=n > calibration.MAX_N) or Level(0.0, False)
        out.append(level)
        hit = alive & (p <= level.q)
        crossed += int(hit.sum())
        alive &= ~hit
    return tuple(out)


def _spending_level(live: np.ndarray, want: int, robust: bool) -> Level | None:
    """The largest threshold q with at most `want` of the live p-values <= q (None: even the smallest value
    occurs more than `want` times, as a permutation test's floor may)."""
    if want >= live.size:
        return Level(1.0, robust)
    srt = np.sort(live)
    v = srt[want - 1]
    if srt[want] > v:
        return Level(float(v), robust)
    below = int(np.searchsorted(srt, v, side="left"))       # a tie spans want and want + 1: stop below it
    return Level(float(srt[below - 1]), robust) if below > 0 else None


def levels(s: "State", design: "Design", alpha: float | None = None,
           extra: tuple[tuple[int, float], ...] = (), paired: bool | None = None) -> tuple[Level, ...]:
    """The calibrated levels of a comparison's looks (and of planned `extra` (n, t) looks); paired: its design
    (default: the design of its recorded looks)."""
    ns = tuple(int(look["n"]) for look in s.looks) + tuple(n for n, _ in extra)
    fr = _increasing(s.fractions + tuple(t for _, t in extra))
    return look_levels(s.paired if paired is None else paired, ns, fr, s.alpha if alpha is None else alpha,
                       design.spending)


def z_of_level(q: float) -> float:
    """The z value whose two-sided nominal p is q (the inverse of nominal_p)."""
    return 40.0 if q <= 0 else float(sps.norm.isf(q / 2))


@dataclass
class LookStat:
    """One comparison at one look (a = variant, b = baseline; differences a - b)."""
    n: int                    # ended seeds per arm (the smaller arm): the information of this look
    test: str
    pvalue: float             # two-sided
    estimate: float           # difference of means (or median shift for the worst-rank test)
    se: float = math.nan      # standard error of the estimate (t tests)
    df: float = math.nan
    low90: float = math.nan   # the EQUIVALENCE interval
    high90: float = math.nan
    design: str = "paired"    # "paired" or "independent": which calibration paths its levels come from

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def look_stat(design: str, a, b, lost_a: int = 0, lost_b: int = 0, lower_is_better: bool = True,
              level: Level | None = None) -> LookStat:
    """The fixed design's test for one comparison: worst-rank when seeds were lost; else the test its calibrated
    `level` names (next_level: the robust permutation test or the t-test; None: the robust test where its
    exact floor reaches alpha 0.05, as a fixed sweep of one comparison decides), run as the calibration ran it
    (sweeper.adaptive.calibration.look_test). a and b are the usable values (paired: aligned by seed). Estimate
    and the 90% interval (the "no effect" label) are the t-test's; se (futility) is on the deciding test's scale."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = min(a.size + lost_a, b.size + lost_b)
    if lost_a or lost_b:
        if a.size == 0 or b.size == 0:
            p = stats.worst_rank_test(a, b, lost_a, lost_b, lower_is_better).test.pvalue if a.size + b.size else 1.0
            return LookStat(n, "worst-rank test", float(p), math.nan, design=design)
        w = stats.worst_rank_test(a, b, lost_a, lost_b, lower_is_better)
        se = math.nan
        if a.size > 1 and b.size > 1:            # Welch's se of the usable values: the scale of X for futility
            se = float(math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size))
        return LookStat(n, "worst-rank test", float(w.test.pvalue), float(np.median(a) - np.median(b)), se,
                        design=design)
    paired = design == "paired"
    test = robust.t_test(a, b, paired, EQUIVALENCE)
    d = a - b if paired else None
    est = float(d.mean()) if d is not None else float(a.mean() - b.mean())
    if d is not None:
        se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.nan
    else:
        se = float(math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)) if min(a.size, b.size) > 1 else math.nan
    permutation = level.robust if level is not None else robust.uses_permutation(paired, a.size, b.size)
    deciding = calibration.look_test(a, b, paired, permutation)
    if not deciding.name.endswith("t-test") and min(a.size, b.size) > 1:   # futility on the deciding test's scale
        sd = robust.spread(a, b, paired, permutation=True)
        se = sd / math.sqrt(a.size) if paired else sd * math.sqrt(1 / a.size + 1 / b.size)
    return LookStat(n, deciding.name, float(deciding.pvalue), est, se, float(test.df), float(test.ci[0]),
                    float(test.ci[1]), design)


def next_level(design: Design, s: "State", n: int, paired: bool) -> Level:
    """The level (test and p threshold) a look at n seeds per arm would get (before the look is recorded)."""
    return levels(s, design=design, extra=((n, min(1.0, n / design.max_seeds)),), paired=paired)[-1]


@dataclass
class State:
    """One comparison across looks."""
    variant: str
    alpha: float                                   # its current local level (Holm / graphical)
    status: str = OPEN
    reason: str = ""
    looks: list[dict] = field(default_factory=list)   # per look: n, t, stat, boundary_z, nominal_p, spent, alpha_i

    @property
    def n(self) -> int:
        return self.looks[-1]["n"] if self.looks else 0

    @property
    def fractions(self) -> tuple[float, ...]:
        return tuple(look["t"] for look in self.looks)

    @property
    def paired(self) -> bool:
        """The design of its looks (looks recorded before the design was recorded: paired)."""
        return not self.looks or self.looks[-1]["stat"].get("design", "paired") == "paired"


def start_states(design: Design, variants: list[str]) -> dict[str, State]:
    m = max(1, len(variants))
    return {v: State(v, design.alpha / m) for v in variants}


def _crossed(design: Design, s: State) -> int | None:
    """The first look whose p-value is at or below the boundary at s.alpha, else None."""
    for k, (look, level) in enumerate(zip(s.looks, levels(s, design=design))):
        if look["stat"]["pvalue"] is not None and look["stat"]["pvalue"] <= level.q:
            return k
    return None


def _increasing(fr: tuple[float, ...]) -> tuple[float, ...]:
    out, last = [], 0.0
    for t in fr:
        t = max(t, last + 1e-6)
        out.append(min(t, 1.0))
        last = out[-1]
    return tuple(out)


def conditional_power(design: Design, st: LookStat, t: float, c_final: float, effect: float | None = None) -> float:
    """P(|Z at max_seeds| >= c_final | data so far) if the true difference were +-effect (default min_effect; the
    larger of the two signs)."""
    if not (math.isfinite(st.se) and st.se > 0 and t < 1):
        return 1.0
    effect = design.min_effect if effect is None else effect
    se_final = st.se * math.sqrt(t)                 # se shrinks as 1/sqrt(n)
    theta = effect / se_final                       # expected Z at t = 1 under that effect
    z = st.estimate / st.se if st.test.endswith("t-test") else _z_of(st)      # other tests: z of their p-value
    b_now = z * math.sqrt(t)
    sd = math.sqrt(1 - t)
    best = 0.0
    for sign in (1, -1):
        mean = b_now + sign * theta * (1 - t)
        best = max(best, sps.norm.sf((c_final - mean) / sd) + sps.norm.cdf((-c_final - mean) / sd))
    return float(best)


def _z_of(st: LookStat) -> float:
    """The look's signed z: the normal quantile of its two-sided p-value, with the estimate's sign."""
    p = min(max(st.pvalue, 1e-300), 1.0)
    z = float(sps.norm.isf(p / 2))
    return -z if (math.isfinite(st.estimate) and st.estimate < 0) else z


def predictive_power(st: LookStat, t: float, c_final: float) -> float:
    """P(|Z at max_seeds| >= c_final | data so far), averaging over the effect's flat-prior posterior."""
    if not (t < 1) or st.pvalue is None or not math.isfinite(st.pvalue):
        return 1.0
    z = _z_of(st)
    mean, sd = z / math.sqrt(t), math.sqrt((1 - t) / t)
    return float(sps.norm.sf((c_final - mean) / sd) + sps.norm.cdf((-c_final - mean) / sd))


def _equivalent(design: Design, st: LookStat) -> bool:
    return (math.isfinite(st.low90) and math.isfinite(st.high90)
            and -design.min_effect < st.low90 and st.high90 < design.min_effect)


def decide_look(design: Design, states: dict[str, State], looks: dict[str, LookStat],
                invalid: dict[str, str] | None = None, last: bool | None = None) -> None:
    """Record this look's statistic for every open comparison in `looks`, then decide (in place): crossings
    with alpha passed on (graphical Holm), invalid (health), futility, budget. last: force a final look."""
    invalid = invalid or {}
    for name, st in looks.items():
        s = states[name]
        if s.status != OPEN:
            continue
        t = min(1.0, st.n / design.max_seeds)
        s.looks.append({"n": st.n, "t": t, "stat": st.to_dict(), "alpha_i": s.alpha})
    for name in looks:
        s = states[name]
        if s.status == OPEN and name in invalid:
            s.status, s.reason = INVALID, f"health checks failed ({invalid[name]}): stopped at its first look"
    changed = True
    while changed:                     # graphical Holm: a decided comparison passes its alpha on
        changed = False
        for name, s in states.items():
            if s.status != OPEN or name not in looks:
                continue
            k = _crossed(design, s)
            if k is None:
                continue
            est = s.looks[k]["stat"]["estimate"]
            higher = est is not None and est > 0
            s.status = WORSE if higher == design.lower_is_better else BETTER
            s.reason = (
                f"crossed its boundary at look {k + 1} ({s.looks[k]['n']} seeds): p={s.looks[k]['stat']['pvalue']:.3g}"
                f" <= nominal {_nominal_at(design, s, k):.3g} (local level {s.alpha:.3g})"
            )
            rest = [o for o in states.values() if o.status not in (BETTER, WORSE)]
            for o in rest:
                o.alpha += s.alpha / len(rest)
            changed = True
    for name, s in states.items():
        if name not in looks:
            continue
        if s.looks and s.looks[-1]["alpha_i"] != s.alpha:
            s.looks[-1]["alpha_i_after"] = s.alpha
        level = levels(s, design=design)[-1]
        s.looks[-1]["boundary_z"], s.looks[-1]["nominal_p"] = z_of_level(level.q), level.q
        s.looks[-1]["spent"] = spent(s.fractions[-1], s.alpha, design.spending) * CALIBRATION_SHARE  # what q spends
        if s.status != OPEN:
            continue
        st = looks[name]
        final = last if last is not None else s.n >= design.max_seeds
        if final:
            if _equivalent(design, st):
                s.status = NO_EFFECT
                s.reason = (
                    f"no effect >= {design.min_effect:.4g}: the {EQUIVALENCE:.0%} interval "
                    f"{st.low90:.4g} to {st.high90:.4g} lies inside +-{design.min_effect:.4g} at {s.n} seeds"
                )
            else:
                s.status = BUDGET
                s.reason = f"inconclusive at budget: no boundary crossed by {s.n} seeds (max_seeds {design.max_seeds})"
            continue
        if len(s.looks) < 2:  # the first look's spread rests on start - 1 degrees of freedom
            continue
        c_final = z_of_level(levels(s, design=design, extra=((design.max_seeds, 1.0),))[-1].q)
        t_now = s.fractions[-1]
        cp = conditional_power(design, st, t_now, c_final)
        pp = predictive_power(st, t_now, c_final)
        s.looks[-1]["conditional_power"], s.looks[-1]["predictive_power"] = cp, pp
        if cp >= FUTILITY_POWER and pp >= PREDICTIVE_POWER:
            continue
        why = (
            f"even a true difference of {design.min_effect:.4g} would cross the final boundary by "
            f"{design.max_seeds} seeds with probability {cp:.2g} < {FUTILITY_POWER}"
            if cp < FUTILITY_POWER
            else f"the data's trend predicts a final crossing by {design.max_seeds} seeds with probability "
            f"{pp:.2g} < {PREDICTIVE_POWER}"
        )
        if _equivalent(design, st):
            s.status = NO_EFFECT
            s.reason = (
                f"no effect >= {design.min_effect:.4g}: the {EQUIVALENCE:.0%} interval {st.low90:.4g} to "
                f"{st.high90:.4g} lies inside +-{design.min_effect:.4g} and {why} (stopped at {s.n} seeds)"
            )
        else:
            s.status = BUDGET
            s.reason = f"inconclusive at budget: {why} (stopped at {s.n} seeds)"
    for name, s in states.items():
        if name in looks and s.looks:
            s.looks[-1]["decision"] = s.status


def _nominal_at(design: Design, s: State, k: int) -> float:
    return levels(s, design=design)[k].q


def still_open(states: dict[str, State]) -> list[str]:
    return [n for n, s in states.items() if s.status == OPEN]


def fixed_design_runs(design: Design, n_variants: int) -> int:
    """Runs of the fixed design with the same maximum: every arm at max_seeds."""
    return (n_variants + 1) * design.max_seeds

"""Training and validation curves the live monitor keeps, and what is read off them (pure Python, no torch).

    curve = Curve(max_points=512); curve.add(step, value)          # adjacent pairs merge beyond max_points
    trend = train_trend(curve.points(), first_loss, num_classes, th)  # Trend: falls | flat | rises | blew_up | short
    checks = val_checks(curve.points(), val_loss_points, val_acc_points, trend, num_classes, total_steps, th)

The train curve holds the mean loss of each monitor interval (step = the interval's last step); `first_loss` is the
loss of the very first step, so a model that learns within its first interval still shows as falling. The
validation checks follow the debugging checklist's last question, "does the val loss fall too?":

val_at_chance  val loss never below ln C (and val accuracy at 1/C) while the train loss falls well below it: the
               model memorises and nothing transfers - labels that do not match their inputs (bug).
val_shift      val loss far above the train loss from the start of learning (every evaluation while the train loss
               is between half and 80% of its first value), or at its best while the model had barely begun to learn
               and rising while the train loss falls: train and val come from different distributions (bug).
overfitting    val loss rising from its minimum while the train loss keeps falling: overfitting from the step of
               that minimum (benign: not a bug).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sweeper.health.result import CheckResult
from sweeper.health.thresholds import Thresholds

VAL_ENABLE = "validation metrics (run.log(step, val_loss=..., val_acc=...) or LiveMonitor.observe_eval)"


class Curve:
    """(step, value) points, at most `max_points`: beyond that, adjacent pairs merge into their weighted mean at
    the later step, so a run of any length keeps a bounded, evenly thinned curve (and a small checkpoint)."""

    def __init__(self, max_points: int = 512):
        self.max_points = max(8, int(max_points))
        self.data: list[list[float]] = []          # [step, value, weight]

    def add(self, step: int, value: float, weight: float = 1.0) -> None:
        if self.data and step <= self.data[-1][0]:  # a resumed run replays steps: keep the newest figure
            while self.data and step <= self.data[-1][0]:
                self.data.pop()
        self.data.append([int(step), float(value), float(weight)])
        if len(self.data) > self.max_points:
            merged = []
            for i in range(0, len(self.data) - 1, 2):
                (_, v1, w1), (s2, v2, w2) = self.data[i], self.data[i + 1]
                merged.append([s2, (v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2])
            if len(self.data) % 2:
                merged.append(self.data[-1])
            self.data = merged

    def points(self) -> list[tuple[int, float]]:
        return [(int(s), v) for s, v, _ in self.data]

    def __len__(self) -> int:
        return len(self.data)

    def state_dict(self) -> list[list[float]]:
        return [list(p) for p in self.data]

    def load_state_dict(self, data: list[list[float]] | None) -> None:
        self.data = [list(p) for p in data or []]


@dataclass
class Trend:
    """The train loss over the run: kind is falls, flat, rises, blew_up, short (too few points) or unknown."""
    kind: str
    first: float | None = None
    end: float | None = None
    peak: float | None = None
    peak_step: int | None = None
    at_chance: bool = False
    above_chance: bool = False
    plateaued: bool = False
    points: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def plateaued(values: list[float], tolerance: float = 0.02) -> bool:
    """No longer falling: the mean of the last fifth is within `tolerance` of the fifth before it."""
    n = max(1, len(values) // 5)
    if len(values) < 2 * n or len(values) < 5:
        return False
    last, prev = _mean(values[-n:]), _mean(values[-2 * n:-n])
    return prev - last <= tolerance * abs(prev)


def train_trend(points: list[tuple[int, float]], first: float | None, num_classes: int | None,
                th: Thresholds) -> Trend:
    values = [v for _, v in points if math.isfinite(v)]
    if len(values) < 5:
        return Trend("short", first=first, points=len(values))
    first = values[0] if first is None or not math.isfinite(first) else first
    end = _mean(values[-max(1, len(values) // 5):])
    peak_i = max(range(len(points)), key=lambda i: points[i][1] if math.isfinite(points[i][1]) else -math.inf)
    peak, peak_step = points[peak_i][1], points[peak_i][0]
    trend = Trend("falls", first=first, end=end, peak=peak, peak_step=peak_step, points=len(values),
                  plateaued=plateaued(values, th.overfit_plateau))
    if first <= 0:                       # a loss that can go negative: no scale to judge falling by
        trend.kind = "unknown"
        return trend
    if num_classes:
        chance = math.log(num_classes)
        trend.above_chance = end > chance * th.chance_above_factor
        trend.at_chance = end >= chance * (1 - th.stuck_tolerance) and not trend.above_chance
    if peak >= th.trend_blowup * first:
        trend.kind = "blew_up"
    elif end >= first * (1 + th.trend_rise):
        trend.kind = "rises"
    elif trend.at_chance or first - end < th.trend_flat * first:
        trend.kind = "flat"
    return trend


def value_at(points: list[tuple[int, float]], step: int) -> float | None:
    """The curve's value at `step`: the last point at or before it (else the first point)."""
    before = [v for s, v in points if s <= step]
    if before:
        return before[-1]
    return points[0][1] if points else None


def val_checks(train: list[tuple[int, float]], val_loss: list[tuple[int, float]], val_acc: list[tuple[int, float]],
               trend: Trend, num_classes: int | None, total_steps: int | None, th: Thresholds) -> list[CheckResult]:
    if not val_loss and not val_acc:
        return [CheckResult("val_at_chance", "skip", None, "", f"not run: no validation metrics; pass {VAL_ENABLE}",
                            {"enable": "val metrics: run.log(step, val_loss=...)"})] + [
            CheckResult(name, "skip", None, "", "no validation metrics") for name in ("val_shift", "overfitting")]
    chance = _val_at_chance(val_loss, val_acc, trend, num_classes, th)
    return [chance, _val_shift(train, val_loss, trend, th, chance.status == "fail"), _overfitting(train, val_loss, th)]


def _val_at_chance(val_loss, val_acc, trend: Trend, num_classes: int | None, th: Thresholds) -> CheckResult:
    name = "val_at_chance"
    if not num_classes:
        return CheckResult(name, "skip", None, "", "not run: needs num_classes (chance = ln C, 1/C)",
                           {"enable": "num_classes=..."})
    ln_c, acc_c, tol = math.log(num_classes), 1.0 / num_classes, th.val_chance_tolerance
    expected = (f"val loss below {(1 - 2 * tol) * ln_c:.3f} or val acc above {acc_c + tol:.3f} once the train loss "
                f"falls")
    if len(val_loss) + len(val_acc) < 2 or trend.kind in ("short", "unknown"):
        return CheckResult(name, "skip", None, expected, "too few validation points or train-loss points to judge")
    at_chance, said = True, []
    figure = None
    if val_acc:                        # the later half's median: a faint early signal may be memorised away
        late = _median([a for _, a in val_acc][len(val_acc) // 2:])
        at_chance &= late <= acc_c + tol
        figure = late
        said.append(f"val accuracy {late:.3f} over the later half (chance 1/{num_classes} = {acc_c:.3f})")
    if val_loss:                       # never meaningfully better than a uniform prediction
        best = min(val_loss, key=lambda p: p[1])
        at_chance &= best[1] >= (1 - 2 * tol) * ln_c
        figure = best[1] if figure is None else figure
        said.append(f"val loss never below {best[1]:.3f} (step {best[0]}; ln({num_classes}) = {ln_c:.3f})")
    what = " and ".join(said)
    train_fell = trend.end is not None and trend.end <= (1 - 4 * tol) * ln_c
    details = {"chance_loss": ln_c, "chance_acc": acc_c, "train_end": trend.end, "diagnosis": None}
    if at_chance and train_fell:
        details["diagnosis"] = "labels_do_not_match_inputs"
        return CheckResult(name, "fail", figure, expected,
                           f"{what} while the train loss fell {trend.first:.3g} -> {trend.end:.3g}: the model "
                           f"memorises its training examples and nothing transfers - labels that do not match their "
                           f"inputs (inputs and labels shuffled separately, a misaligned join or index, labels of "
                           f"another split). Fix: shuffle one index for both, check a few (input, label) pairs by eye",
                           details)
    if at_chance:
        return CheckResult(name, "pass", figure, expected,
                           f"{what}, but the train loss is no better ({trend.end:.3g}): see train_trend", details)
    return CheckResult(name, "pass", figure, expected, f"validation better than chance: {what}", details)


def _val_shift(train, val_loss, trend: Trend, th: Thresholds, at_chance: bool) -> CheckResult:
    """Judged on the evaluations made while the model learns but has not memorised yet: the train loss has fallen
    (below 1 - 4 trend_flat of its first value) but is still above val_shift_early of it. There, a val loss from the
    train distribution tracks the train loss (measured on batches before their update); every such evaluation
    must show the gap. A tiny train set memorised within those first evaluations looks the same (the monitor does
    not know the epochs): it is then named here rather than as overfitting."""
    name = "val_shift"
    expected = f"val loss < {th.val_shift_factor:g}x train loss while the model begins to learn"
    first = trend.first
    if not val_loss or not train or not first or first <= 0:
        return CheckResult(name, "skip", None, expected, "needs val-loss points and a positive train loss")
    early = []
    for s, v in val_loss:
        t = value_at(train, s)
        if s > 0 and t is not None and t > 0 and th.val_shift_early * first <= t <= (1 - 4 * th.trend_flat) * first:
            early.append((s, v, t, v / t))
    if not early:
        return CheckResult(
            name,
            "skip",
            None,
            expected,
            f"no evaluation while the train loss was between {th.val_shift_early:.0%} and "
            f"{1 - 4 * th.trend_flat:.0%} of its first value {first:.3g} (learning, not yet memorising): "
            f"evaluate early in the run to tell a distribution shift from overfitting",
        )
    s, v, t, r = early[0]
    details = {"first_eval_step": s, "val_loss": v, "train_loss": t, "ratio": r, "diagnosis": None}
    never = _never_improved(train, val_loss, first, th)
    if never and not at_chance:
        details.update(diagnosis="leak_or_shift", never_improved=never)
        return CheckResult(
            name,
            "fail",
            never["ratio"],
            expected,
            f"val loss stopped improving at step {never['step']} ({never['val_min']:.3g}), when the "
            f"model had barely begun to learn (train {never['train_at_min']:.3g}, from {first:.3g}), "
            f"and rose to {never['val_end']:.3g} while the train loss fell to {never['train_end']:.3g}: "
            f"what the model learns does not carry over - train and val come "
            f"from different distributions (val inputs preprocessed or normalised differently, another "
            f"source or split). Fix: build val with the train pipeline and compare a few examples of "
            f"each",
            details,
        )
    if all(x[3] >= th.val_shift_factor for x in early) and not at_chance:
        details["diagnosis"] = "leak_or_shift"
        return CheckResult(
            name,
            "fail",
            r,
            expected,
            f"val loss {v:.3g} at step {s} is {r:.1f}x the train loss then ({t:.3g}), while the model had "
            f"only begun to learn (train from {first:.3g}), too early for overfitting to open such a "
            f"gap: train and val come from different distributions (val inputs preprocessed or "
            f"normalised differently, another source or split, easy duplicates leaked into train). "
            f"Fix: build val with the train pipeline and compare a few examples of each",
            details,
        )
    return CheckResult(
        name,
        "pass",
        r,
        expected,
        f"val loss {v:.3g} vs train {t:.3g} at step {s}, early in learning: {r:.2f}x",
        details,
    )


def _never_improved(train, val_loss, first: float, th: Thresholds) -> dict[str, Any] | None:
    """The val loss stopped improving while the model had barely begun to learn (its minimum comes while the
    train loss is still above 1 - 4 trend_flat of its first value), then rose by val_rise while the train loss
    fell by a third more: nothing the model learns transfers to val."""
    vals = [(s, v) for s, v in val_loss if s > 0 and math.isfinite(v)]
    if len(vals) < 3:
        return None
    s_min, v_min = min(vals, key=lambda p: p[1])
    s_end, v_end = vals[-1]
    t_min, t_end = value_at(train, s_min), value_at(train, s_end)
    if t_min is None or t_end is None or t_min <= 0 or t_min < (1 - 4 * th.trend_flat) * first:
        return None
    if s_end <= s_min or v_end < v_min * (1 + th.val_rise) or t_end > t_min * (1 - 1 / 3):
        return None
    return {
        "step": s_min,
        "val_min": v_min,
        "val_end": v_end,
        "train_at_min": t_min,
        "train_end": t_end,
        "ratio": v_end / v_min,
    }


def _overfitting(train, val_loss, th: Thresholds) -> CheckResult:
    name = "overfitting"
    expected = f"val loss within {th.val_rise:.0%} of its minimum while train falls"
    vals = [(s, v) for s, v in val_loss if math.isfinite(v)]
    if len(vals) < 3:
        return CheckResult(name, "skip", None, expected, "fewer than 3 val-loss points")
    s_min, v_min = min(vals, key=lambda p: p[1])
    s_end, v_end = vals[-1]
    if v_min <= 0:
        return CheckResult(name, "skip", None, expected, "val loss not positive: no relative rise to judge")
    rise = v_end / v_min - 1
    t_min, t_end = value_at(train, s_min), value_at(train, s_end)
    train_fell = t_min is not None and t_end is not None and t_end < t_min
    sustained = all(v >= v_min * (1 + th.val_rise / 2) for _, v in vals[-2:])
    details = {
        "step": s_min,
        "val_min": v_min,
        "val_end": v_end,
        "train_at_min": t_min,
        "train_end": t_end,
        "diagnosis": None,
    }
    if s_end > s_min and rise >= th.val_rise and sustained and train_fell:
        details["diagnosis"] = "overfitting"
        return CheckResult(
            name,
            "warn",
            rise,
            expected,
            f"val loss rose from {v_min:.3g} (its minimum, step {s_min}) to {v_end:.3g} (step "
            f"{s_end}, +{rise:.0%}) while the train loss fell {t_min:.3g} -> {t_end:.3g}: overfitting "
            f"from step {s_min} on (not a bug). Keep the checkpoint of step {s_min} (early stopping), "
            f"or add data, weight decay, dropout, augmentation",
            details,
        )
    return CheckResult(
        name,
        "pass",
        rise,
        expected,
        f"val loss {v_end:.3g} at step {s_end}, {rise:+.0%} from its minimum {v_min:.3g} (step {s_min})",
        details,
    )

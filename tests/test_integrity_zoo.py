"""The integrity zoo: broken sweeps and their healthy twins, through the real CLI, judged by what the sweeps write.

    python -m pytest -q -n 2 tests/test_integrity_zoo.py                 # every pair (slow: two sweeps a pair)
    python -m pytest -q -n 0 tests/test_integrity_zoo.py -k seeds_       # one class
    python benchmarks/integrity_zoo.py --workers 2                       # the catch table

Each pair of tests/integrity_zoo/ is a tiny project written from the class descriptions only (docs/sweep-integrity.md,
issue 45), never from the checks' code. The bug must be named by a check of its class on the expected variant (its
summary.csv row or report.md's "Checks across runs"); the twin, which differs only in the bug, must keep every
verdict plain (better / worse / inconclusive / insufficient) and get no finding of the bug's class. Pairs that the
checks as they landed miss are marked xfail (KNOWN_MISSES, with what they said); a pass there is news, not noise.
"""
from __future__ import annotations

import json

import pytest

from tests.helpers.integrity_zoo import CHECK_NAMES, load_cases, run_pair

CASES = load_cases()

# What the checks miss: measured on branch zoo as created (benchmarks/results/integrity_zoo_before.md: 28 missed), then
# on main after the second round (b431892): 11 still missed; the other 17 are caught and now guard. Since caught
# and guarding: coarse_rounded_cmd, coarse_tiny_holdout_cmd, direction_*, select_unlogged_cmd, select_window_max_api.
KNOWN_MISSES: dict[str, str] = {
    "subset_hardcoded_slice_api": "bug missed (nothing named): no evidence; the run records neither the size of "
                                  "what it trained on nor of the split it was cut from (docs/sweep-integrity.md, "
                                  "train_subset)",
    # red team round 3 (branch zoo2, on main a329634; benchmarks/results/integrity_zoo_r3.md): 39 new pairs, 9 missed,
    # named by another check only, or alarmed on their healthy twin; caught since (int3): budget_grad_accum_cmd,
    # coarse_quick_eval_cmd, select_eval_every_api, subset_nrows_cmd, subset_sample_frac_api, subset_smoke_flag_cmd
    "r3_budget_patience_api": "bug other (named: several_concerns): the bug never bites: with patience=1 the tuned "
                              "runs still train all 60 epochs (the validation loss falls by more than 1e-4 every "
                              "epoch), so both arms' ledgers read 24,000 examples and 480 steps; no budget differs, "
                              "and several_concerns (lr and patience) is the right finding. The pair needs a script "
                              "whose validation loss turns",
    "r3_eval_val_inside_train_cmd": "bug missed (nothing named): no evidence; val_loss below the epoch's running "
                                    "train_loss is also what a healthy run with a disjoint validation set shows "
                                    "when the training set is large (the twin's script on 3,000 training examples: "
                                    "15 of 15 epochs at lr 0.05 and 0.2), so a curve rule would alarm on it",
    "r3_evalset_dedup_split_cmd": "bug missed (nothing named): no evidence; the script records no evaluation "
                                  "size or fingerprint (evaluation_identity's coverage line says 'not checked')",
}


def _param(case):
    reason = f"checks as they landed: {KNOWN_MISSES.get(case.name)}: {case.what}"
    marks = [pytest.mark.xfail(strict=False, reason=reason)] if case.name in KNOWN_MISSES else []
    return pytest.param(case, id=case.name, marks=marks)


def test_every_pair_is_well_formed():
    """Each case.json names agreed checks and a real variant; both sides exist; 3+ pairs per class, both kinds."""
    by_class: dict = {}
    for case in CASES:
        assert set(case.expect) <= CHECK_NAMES, f"{case.name}: unknown check in {case.expect}"
        assert case.api in {"command", "run_api"}, case.name
        for side in ("bug", "ok"):
            text = (case.path / "conf" / "experiment" / f"{side}.yaml").read_text()
            if case.variant:
                assert f"{case.variant}:" in text, f"{case.name}/{side}.yaml has no variant {case.variant}"
        by_class.setdefault(case.klass, []).append(case)
        json.loads((case.path / "case.json").read_text())
    assert len(by_class) >= 15
    for klass, cases in by_class.items():
        assert len(cases) >= 3, f"{klass}: {len(cases)} pairs"
    assert 0.35 <= sum(c.api == "command" for c in CASES) / len(CASES) <= 0.65


@pytest.mark.slow
@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_pair(case, tmp_path):
    outcome = run_pair(case, tmp_path)
    assert outcome.caught == "cause", outcome.explain()
    assert not outcome.false_alarms, outcome.explain()

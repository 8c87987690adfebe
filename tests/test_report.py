"""Verdicts, report.md, summary.csv and plots on sweep dirs written to disk; the `python -m sweeper.report` CLI.

    python -m pytest -q tests/test_report.py
"""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from sweeper.analysis.analyze import analyze_sweep
from sweeper.config.decision import DecisionOptions
from sweeper.errors import UsageError
from sweeper.report.markdown import SECTIONS
from sweeper.report.tables import headline
from sweeper.report.write import report_sweep
from tests.helpers.commands import run_sweeper
from tests.helpers.synthetic_sweep import write_sweep

ROPE = {"rope": [3.00, 3.02, 2.99, 3.01], "nope": [3.45, 3.48, 3.44, 3.47], "frozen": [3.40, 3.43, 3.39, 3.44]}
FAST = dict(options=DecisionOptions(n_resamples=2000))


def _by_variant(analysis):
    return {c.variant: c for c in analysis.comparisons}


@pytest.mark.slow
def test_four_seed_rope_sweep_reaches_a_decision(tmp_path):
    root = write_sweep(tmp_path / "s", ROPE, baseline="rope")
    text = report_sweep(root, plots=True, **FAST)
    an = analyze_sweep(root, **FAST).analysis
    comps = _by_variant(an)
    for variant in ("nope", "frozen"):
        c = comps[variant]
        assert c.verdict == "worse" and c.design == "paired" and c.primary.name == "paired t-test"
        ref = sps.ttest_rel(ROPE[variant], ROPE["rope"]).pvalue
        assert c.primary.pvalue == pytest.approx(ref, rel=1e-9)
        assert c.p_adjusted < 0.05 and c.p_better.estimate == 0.0
        assert c.delta.low > 0                             # the whole CI says: higher loss than rope
        assert c.robustness.min_p == pytest.approx(2 / 16) # 4 pairs: the sign-flip test can never decide
    raw = [comps["nope"].primary.pvalue, comps["frozen"].primary.pvalue]
    assert sorted([comps["nope"].p_adjusted, comps["frozen"].p_adjusted]) == pytest.approx(
        sorted([min(raw) * 2, max(max(raw), min(raw) * 2)]))
    assert "rope beats nope, frozen" in text
    md = (root / "report.md").read_text()
    positions = [md.index(f"## {s}") for s in SECTIONS]
    assert positions == sorted(positions)                  # decision table first, then per-seed values, ...
    assert "paired t-test drives the verdict" in md and "scipy" in md and "10000" not in md.split("## Methods")[0]
    for png in ("metric_curve", "final_metric", "grad_norm"):
        data = (root / "plots" / f"{png}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
        assert f"plots/{png}.png" in md
    csv = pd.read_csv(root / "summary.csv")
    assert list(csv["variant"]) == ["rope", "nope", "frozen"]
    assert list(csv["verdict"].fillna("")) == ["", "worse", "worse"]
    assert csv.loc[1, "delta"] == pytest.approx(np.mean(ROPE["nope"]) - np.mean(ROPE["rope"]))


def test_independent_runs_use_student_t_at_4_seeds_and_state_the_permutation_floor(tmp_path):
    root = write_sweep(tmp_path / "s", ROPE, baseline="rope", paired=False)
    inp = analyze_sweep(root, **FAST)
    c = _by_variant(inp.analysis)["nope"]
    # 4 vs 4, Holm over 2: no permutation test reaches 0.025 (floor 2/70), so Student's t (equal arms) decides
    assert c.design == "independent" and c.primary.name == "Student t-test"
    assert c.primary.pvalue == pytest.approx(sps.ttest_ind(ROPE["nope"], ROPE["rope"]).pvalue)
    assert c.robustness.pvalue == pytest.approx(2 / 70) == c.robustness.min_p
    assert any("smallest p it can reach" in n and "0.0571" in n for n in c.notes)
    assert c.verdict == "worse"


def test_identical_arms_are_inconclusive_with_p_half(tmp_path):
    root = write_sweep(tmp_path / "s", {"a": [3.0, 3.1, 3.2, 3.3], "b": [3.0, 3.1, 3.2, 3.3]}, paired=False)
    c = analyze_sweep(root, **FAST).analysis.comparisons[0]
    assert c.verdict == "inconclusive" and c.p_better.estimate == 0.5 and c.delta.estimate == 0
    assert c.primary.pvalue == pytest.approx(1.0)
    assert c.seeds_needed is None and "no finite number of seeds" in c.reason
    assert c.mde > 0 and "detected with 80% power" in c.reason


def test_fully_separated_three_seeds_state_the_smallest_reachable_p(tmp_path):
    root = write_sweep(tmp_path / "s", {"a": [3.0, 3.1, 3.2], "b": [3.5, 3.6, 3.7]}, paired=False)
    report_sweep(root, plots=False, **FAST)
    c = analyze_sweep(root, **FAST).analysis.comparisons[0]
    assert c.robustness.pvalue == pytest.approx(0.1) and c.robustness.min_p == pytest.approx(0.1)
    assert any("cannot go below p=0.1" in n for n in c.notes)
    assert c.verdict == "worse"                            # Welch p = 0.0036 drives
    assert "smallest reachable p at this n: 0.1" in (root / "report.md").read_text()


def test_zero_variance_falls_back_to_the_exact_permutation_test(tmp_path):
    values = {"a": [3.0] * 4, "b": [3.5] * 4}
    independent = analyze_sweep(write_sweep(tmp_path / "i", values, paired=False), **FAST).analysis.comparisons[0]
    assert independent.primary.name == "exact permutation test (zero spread)"
    assert independent.primary.pvalue == pytest.approx(2 / 70) and independent.verdict == "worse"
    assert "zero spread between seeds" in independent.driver_why
    paired = analyze_sweep(write_sweep(tmp_path / "p", values), **FAST).analysis.comparisons[0]
    assert paired.primary.name == "exact sign-flip test (zero spread)" and paired.primary.pvalue == pytest.approx(0.125)
    assert paired.verdict == "inconclusive" and "6 seeds per arm could decide" in paired.reason   # 2/2^6 < 0.05


def test_one_usable_seed_is_insufficient(tmp_path):
    root = write_sweep(tmp_path / "s", {"a": [3.0, 3.1, 3.2], "b": [3.5, 3.6, 3.7]},
                       status={("b", 1): "missing", ("b", 2): "failed"})
    report_sweep(root, plots=False, **FAST)
    c = analyze_sweep(root, **FAST).analysis.comparisons[0]
    assert c.verdict == "insufficient" and c.primary is None
    assert c.reason == "b: 1 of 3 seeds usable, 1 failed, 1 not finished, need 3"
    assert "insufficient" in (root / "report.md").read_text()


def test_nan_and_diverged_seeds_count_against_the_variant(tmp_path):
    root = write_sweep(tmp_path / "s", {"base": [3.0, 3.1, 3.2, 3.05, 3.15],
                                        "var": [2.5, float("nan"), None, 2.6, 2.55]})
    inp = analyze_sweep(root, **FAST)
    arm = inp.analysis.arms["var"]
    assert (arm.usable, arm.diverged, arm.failed) == (3, 2, 0)
    c = inp.analysis.comparisons[0]
    assert c.verdict == "inconclusive" and "biased sample" in c.reason   # lower loss, but on survivors only
    report_sweep(root, plots=False, **FAST)
    md = (root / "report.md").read_text()
    assert "finished, no finite metric" in md and "diverged @ step" in md


def test_failures_in_the_baseline_do_not_block_a_better_variant(tmp_path):
    root = write_sweep(tmp_path / "s", {"base": [3.0, 3.1, None, 3.05], "var": [2.5, 2.6, 2.55, 2.52]})
    c = analyze_sweep(root, **FAST).analysis.comparisons[0]
    # A lost baseline seed counts against the baseline (worst rank): 4 vs 3 ended seeds, every var seed ranks
    # better than every base seed and the lost one: the most extreme of C(7,3) = 35 splits, exact p = 1/35.
    assert c.verdict == "better" and c.primary.name == "worst-rank test"
    assert abs(c.primary.pvalue - 2 / 70) < 1e-12 and (c.n_variant, c.n_baseline) == (4, 3)
    assert any("base lost 1 of 4 ended seeds" in n for n in c.notes)
    assert c.decision_ci.high < 0                      # the interval shown agrees with the verdict


def test_fingerprint_differences_are_reported_and_a_different_corpus_blocks_the_verdict(tmp_path):
    torch_differs = {("var", s): {"torch_version": "2.12.0"} for s in range(4)}
    root = write_sweep(tmp_path / "t", {"base": [3.0, 3.1, 3.2, 3.05], "var": [2.5, 2.62, 2.68, 2.58]},
                       fingerprint=torch_differs)
    c = analyze_sweep(root, **FAST).analysis.comparisons[0]
    assert c.verdict == "better" and any("torch_version differs" in n for n in c.notes)
    corpus = {("var", s): {"corpus_hash": "other"} for s in range(4)}
    root = write_sweep(tmp_path / "c", {"base": [3.0, 3.1, 3.2, 3.05], "var": [2.5, 2.62, 2.68, 2.58]},
                       fingerprint=corpus)
    c = analyze_sweep(root, **FAST).analysis.comparisons[0]
    assert c.verdict == "inconclusive" and "different corpora" in c.reason
    report_sweep(root, plots=False, **FAST)
    assert "Differences across runs: corpus_hash" in (root / "report.md").read_text()


def test_different_data_order_means_independent(tmp_path):
    other_order = {("var", 2): {"data_order_hash": "shuffled"}}
    root = write_sweep(tmp_path / "s", {"base": [3.0, 3.1, 3.2], "var": [2.5, 2.6, 2.7]}, fingerprint=other_order)
    c = analyze_sweep(root, **FAST).analysis.comparisons[0]
    assert c.design == "independent" and "data_order_hash" in c.notes[0]


@pytest.mark.slow
def test_interrupted_partial_sweep_reports_what_it_has(tmp_path):
    root = write_sweep(tmp_path / "s", ROPE, status={("nope", 3): "interrupted", ("frozen", 2): "running",
                                                     ("frozen", 3): "missing"})
    text = report_sweep(root, plots=True, **FAST)
    assert "interrupted @ step" in (root / "report.md").read_text()
    comps = _by_variant(analyze_sweep(root, **FAST).analysis)
    assert comps["nope"].verdict == "worse" and comps["nope"].n_pairs == 3
    assert comps["frozen"].verdict == "insufficient" and "2 not finished" in comps["frozen"].reason
    assert "no decision vs frozen" in text
    assert all((root / "plots" / f).exists() for f in ("metric_curve.png", "final_metric.png", "grad_norm.png"))


@pytest.mark.slow
def test_cli_writes_report_and_rejects_bad_input_with_exit_2(tmp_path):
    root = write_sweep(tmp_path / "s", ROPE)
    proc = run_sweeper(str(root), "--no-plots", "--resamples", "500", module="sweeper.report")
    assert proc.returncode == 0, proc.stderr
    assert "verdict" in proc.stdout and "rope beats nope, frozen" in proc.stdout
    assert (root / "report.md").exists() and not (root / "plots").exists()
    for args, key in [([str(tmp_path / "absent")], "does not exist"), ([str(root), "--alpha", "1.5"], "--alpha"),
                      ([str(root), "--min-seeds", "1"], "--min-seeds")]:
        bad = run_sweeper(*args, module="sweeper.report")
        assert bad.returncode == 2 and key in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_compare_two_sweeps_variant_by_variant(tmp_path):
    old = write_sweep(tmp_path / "old", ROPE)
    new = write_sweep(tmp_path / "new", {"rope": [2.80, 2.83, 2.78, 2.82], "nope": ROPE["nope"],
                                         "extra": [1.0, 1.0, 1.0, 1.0]})
    proc = run_sweeper(str(new), "--against", str(old), "--resamples", "500", module="sweeper.report")
    assert proc.returncode == 0, proc.stderr
    out_dir = new / "compare_vs_old"
    md = (out_dir / "report.md").read_text()
    assert "rope@new vs rope@old: better" in md and "nope@new vs nope@old: inconclusive" in md
    assert "variants in only one sweep (not compared): extra, frozen" in md
    assert (out_dir / "plots" / "final_metric.png").exists()
    csv = pd.read_csv(out_dir / "summary.csv")
    assert set(csv["variant"]) == {"rope@old", "rope@new", "nope@old", "nope@new"}
    nope = csv.set_index("variant").loc["nope@new"]
    assert nope["delta"] == pytest.approx(0.0, abs=1e-12) and math.isclose(nope["p_better"], 0.5)


# -- what the report says about damaged files, failed runs and unrecorded settings --------------------------------

def report_cli(*args):
    return run_sweeper(*map(str, args), "--no-plots", "--resamples", "500", module="sweeper.report")


@pytest.mark.slow
def test_every_damaged_file_is_a_warning_line_on_the_terminal(tmp_path):
    root = write_sweep(tmp_path / "s", ROPE)
    damaged = {root / "runs/rope/seed_0/status.json": b"{not json",
               root / "runs/nope/seed_1/summary.json": b'{"status": "finished", "final": {"val_l',
               root / "runs/frozen/seed_2/metrics.jsonl": None}
    for path, data in damaged.items():
        if data is None:
            path.write_text(path.read_text() + '{"step": 999, "val_lo')          # a line cut in half
        else:
            path.write_bytes(data)
    proc = report_cli(root)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("WARNING: ")]
    assert len(warnings) == 3, proc.stdout
    for path in damaged:
        assert sum(str(path) in w for w in warnings) == 1, (path, warnings)
    assert any("the run status is not valid JSON" in w and "delete it" in w for w in warnings)
    md = (root / "report.md").read_text().split("## Problems reading the sweep")[1]
    assert all(str(path) in md for path in damaged)
    # rope/seed_0: its status is damaged but its summary says finished: it still counts, with its value
    inp = analyze_sweep(root, **FAST)
    assert inp.analysis.arms["rope"].usable == 4 and inp.analysis.arms["nope"].usable == 3


def test_a_damaged_manifest_is_exit_2_naming_it_and_the_fix(tmp_path):
    root = write_sweep(tmp_path / "s", ROPE)
    (root / "sweep.json").write_text('{"experiment": ')
    proc = report_cli(root)
    assert proc.returncode == 2 and not (root / "report.md").exists()
    assert proc.stderr.strip().splitlines() == [
        f"sweeper.report: error: {root / 'sweep.json'}: the sweep manifest is not valid JSON (Expecting value at "
        f"line 1); restore it from a backup, or start the sweep again in a new directory"]


def _unrecord(root, **fields):
    manifest = json.loads((root / "sweep.json").read_text())
    manifest["experiment"].update(fields)
    (root / "sweep.json").write_text(json.dumps(manifest))


@pytest.mark.slow
def test_no_recorded_baseline_asks_for_one_and_the_options_override_the_manifest(tmp_path):
    odd = {"lr=0.001 wd=0": [3.00, 3.02, 2.99, 3.01], "lr=0.01,wd=0.1": [3.45, 3.48, 3.44, 3.47],
           'lr="1e-4"|b': [3.40, 3.43, 3.39, 3.44]}
    root = write_sweep(tmp_path / "s", odd, baseline="")
    proc = report_cli(root)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"sweeper.report: error: no baseline recorded for {root}: pass --baseline VARIANT "
                                   f'(variants: lr=0.001 wd=0, lr=0.01,wd=0.1, lr="1e-4"|b)')
    typo = report_cli(root, "--baseline", "lr=0.001 wd=0", "--metric", "val_los")    # the report's own flag
    assert typo.returncode == 2 and "has a final val_los; pass --metric NAME (final metrics of its runs:" in typo.stderr
    proc = report_cli(root, "--baseline", "lr=0.001 wd=0")
    assert proc.returncode == 0, proc.stderr
    assert "lr=0.001 wd=0 beats lr=0.01,wd=0.1, lr=\"1e-4\"|b" in proc.stdout
    csv = pd.read_csv(root / "summary.csv")                      # names with ',' '=' '"' and spaces survive
    assert list(csv["variant"]) == list(odd) and list(csv["verdict"].fillna("")) == ["", "worse", "worse"]
    md = (root / "report.md").read_text()
    assert '| lr="1e-4"\\|b |' in md                             # the '|' is escaped inside the table
    bad = report_cli(root, "--baseline", "lr=1")
    assert bad.returncode == 2 and "baseline 'lr=1' has no runs in" in bad.stderr
    # higher is better turns every verdict round; another metric is named or refused
    flipped = analyze_sweep(root, baseline="lr=0.001 wd=0", lower_is_better=False, **FAST).analysis
    assert {c.numbers_say for c in flipped.comparisons} == {"better"}
    assert {c.verdict for c in flipped.comparisons} == {"invalid"}       # a loss declared higher-is-better:
    assert {tuple(c.integrity_checks) for c in flipped.comparisons} == {("metric_direction",)}   # named
    by_train = analyze_sweep(root, baseline="lr=0.001 wd=0", metric="train_loss", **FAST).analysis
    assert by_train.metric == "train_loss" and len(by_train.comparisons) == 2
    with pytest.raises(UsageError, match=r"metric 'acc': no run of .* has a final acc; set experiment.metric=NAME "
                                         r"\(final metrics of its runs: train_loss, val_loss\)"):
        analyze_sweep(root, baseline="lr=0.001 wd=0", metric="acc", **FAST)
    _unrecord(root, metric="")
    with pytest.raises(UsageError, match="no decision metric recorded for .*: set experiment.metric=NAME"):
        analyze_sweep(root, baseline="lr=0.001 wd=0", **FAST)


def test_one_variant_without_a_baseline_is_a_table_without_comparisons(tmp_path):
    root = write_sweep(tmp_path / "s", {"lr=0.1": [3.0, 3.1, 3.2]}, baseline="")
    text = report_sweep(root, plots=True, **FAST)
    assert "No comparison: lr=0.1 only." in text
    assert sorted(p.name for p in (root / "plots").iterdir()) == ["final_metric.png", "grad_norm.png",
                                                                  "metric_curve.png", "paired_difference.png"]
    # no live monitor logged health/grad_share/*: no grad_flow.png placeholder (grad_norm was logged)


def test_failed_runs_show_their_error_and_the_log_tail_when_the_error_says_little(tmp_path):
    crash = "step 10 loss 3.2\nTraceback (most recent call last):\n  File \"train_mlp.py\", line 9, in main\n" \
            "ZeroDivisionError: division by zero\n"
    root = write_sweep(tmp_path / "s", ROPE, status={("nope", 0): "failed", ("nope", 1): "failed"},
                       errors={("nope", 0): "ZeroDivisionError: division by zero", ("nope", 1): "exit status 1"},
                       logs={("nope", 0): crash, ("nope", 1): crash})
    text = report_sweep(root, plots=False, **FAST)
    assert "failed runs (2):" in text
    assert "  nope/seed_0: ZeroDivisionError: division by zero" in text.splitlines()
    assert "  nope/seed_1: exit status 1 (log: ZeroDivisionError: division by zero)" in text.splitlines()
    md = (root / "report.md").read_text()
    per_seed = md.split("## Per-seed values")[1].split("## Failed runs")[0]
    assert "failed @ step 100: ZeroDivisionError: division by zero" in per_seed
    failed = md.split("## Failed runs")[1].split("## Variants")[0]
    assert "| nope/seed_1 | - | 1 | exit status 1 (log: ZeroDivisionError: division by zero) |" in failed
    assert "Last lines of the log of nope/seed_1 (runs/nope/seed_1/stdout.log):" in failed
    assert 'File "train_mlp.py", line 9, in main' in failed
    assert "Last lines of the log of nope/seed_0" not in failed          # its error says it all


def test_a_slurm_sweep_with_open_runs_says_how_to_settle_them(tmp_path):
    root = write_sweep(tmp_path / "s", ROPE, status={("nope", 3): "running", ("frozen", 3): "pending"})
    assert "sweeper.slurm status" not in report_sweep(root, plots=False, **FAST)
    (root / "slurm.json").write_text("{}")
    text = report_sweep(root, plots=False, **FAST)
    assert text.splitlines()[-1] == (f"note: 2 run(s) still show running/pending; if their Slurm jobs have ended, "
                                     f"run `python -m sweeper.slurm status {root}` to settle them, then report again")


@pytest.mark.slow
def test_real_mini_sweep_through_the_cli_has_every_section_and_plot(tmp_path):
    from tests.helpers.commands import TINY

    sweep_dir = tmp_path / "sweep"
    proc = run_sweeper("+experiment=rope", "seeds=0-1", *TINY, f"sweeper.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict" in proc.stdout and "rope_frozen_qk" in proc.stdout
    md = (sweep_dir / "report.md").read_text()
    for section in SECTIONS:
        assert f"## {section}" in md, section
    for png in ("metric_curve", "final_metric", "grad_norm"):
        assert (sweep_dir / "plots" / f"{png}.png").read_bytes()[:4] == b"\x89PNG"
    csv = pd.read_csv(sweep_dir / "summary.csv")
    assert set(csv["variant"]) == {"rope", "nope", "rope_frozen_qk"}
    assert (csv["usable"] == 2).all()
    assert set(csv["verdict"].dropna()) == {"insufficient"}     # 2 seeds < min_seeds 3: no guess


def test_a_health_failed_variant_is_invalid_not_worse_and_the_headline_does_not_count_it(tmp_path):
    finals = {"base": [3.0, 3.1, 3.2, 3.05], "frozen": [3.9, 4.05, 4.02, 3.98], "better": [2.5, 2.65, 2.62, 2.58]}
    health = {("frozen", s): "fail" for s in range(4)}
    root = write_sweep(tmp_path / "s", finals, baseline="base", health=health)
    text = report_sweep(root, plots=False, options=DecisionOptions(n_resamples=200))
    inp = analyze_sweep(root, options=DecisionOptions(n_resamples=200))
    frozen = next(c for c in inp.analysis.comparisons if c.variant == "frozen")
    assert frozen.verdict == "invalid" and frozen.invalid_checks == ["qk_grad_nonzero"]
    assert frozen.numbers_say == "worse" and frozen.delta.estimate > 0.8     # the numbers stay visible
    line = next(x for x in text.splitlines() if x.startswith("frozen vs base:"))
    assert line.startswith("frozen vs base: INVALID: health checks failed (qk_grad_nonzero)")
    head = headline(inp.analysis)
    assert "beats frozen" not in head and "not compared with frozen (invalid" in head and "loses to better" in head
    assert head.startswith("base loses to better")          # the baseline is the subject when it loses too
    csv = pd.read_csv(Path(root) / "summary.csv").set_index("variant")
    assert csv.loc["frozen", "verdict"] == "invalid" and csv.loc["frozen", "numbers_say"] == "worse"
    assert csv.loc["frozen", "invalid_checks"] == "qk_grad_nonzero"


def test_secondary_metrics_have_their_own_family_in_report_csv_and_html(tmp_path):
    finals = {"base": [3.0, 3.1, 3.2, 3.05], "new": [2.5, 2.65, 2.62, 2.58]}
    speed = {"tokens_per_s": {"base": [1000.0, 1010.0, 990.0, 1005.0], "new": [700.0, 690.0, 710.0, 705.0]},
             "peak_mem_mb": {"base": [100.0, 101.0, 99.0, 100.5], "new": [100.2, 100.9, 99.1, 100.4]}}
    root = write_sweep(tmp_path / "s", finals, baseline="base", extra_finals=speed,
                       secondary_metrics={"tokens_per_s": "higher", "peak_mem_mb": "lower"})
    text = report_sweep(root, plots=False, options=DecisionOptions(n_resamples=200))
    inp = analyze_sweep(root, options=DecisionOptions(n_resamples=200))
    assert [c.verdict for c in inp.analysis.comparisons] == ["better"]            # primary decision unchanged
    tps = inp.secondary["tokens_per_s"]
    assert not tps.lower_is_better and tps.comparisons[0].verdict == "worse"      # slower: worse in its direction
    assert inp.secondary["peak_mem_mb"].comparisons[0].verdict == "inconclusive"
    assert len(tps.comparisons) == 1 and tps.comparisons[0].p_adjusted == tps.comparisons[0].primary.pvalue
    assert "secondary tokens_per_s (higher is better, own Holm family): new -" in text
    md = (Path(root) / "report.md").read_text()
    assert "### Secondary metric: tokens_per_s (higher is better)" in md
    csv = pd.read_csv(Path(root) / "summary.csv").set_index("variant")
    assert csv.loc["new", "tokens_per_s_verdict"] == "worse"
    assert csv.loc["new", "tokens_per_s_delta"] == pytest.approx(np.mean(speed["tokens_per_s"]["new"])
                                                                 - np.mean(speed["tokens_per_s"]["base"]))
    assert csv.loc["new", "tokens_per_s_ci_high"] < 0
    html = (Path(root) / "report.html").read_text()
    assert "Secondary metric: tokens_per_s (higher is better)" in html and "peak_mem_mb" in html


@pytest.mark.parametrize("damage, says", [
    (lambda m: m[: len(m) // 2], "not valid JSON"), (lambda m: "", "not valid JSON"),
    (lambda m: "[]", "not a JSON object"),
    (lambda m: json.dumps({k: v for k, v in json.loads(m).items() if k != "experiment"}), "no 'experiment'"),
    (lambda m: m.replace('"baseline": "base"', '"baseline": "zzz"'), "is not one of the variants"),
])
def test_a_damaged_manifest_stops_the_report_naming_the_file(tmp_path, damage, says):
    root = write_sweep(tmp_path / "s", {"base": [3.0, 3.1, 3.2, 3.05], "new": [2.5, 2.65, 2.62, 2.58]},
                       baseline="base")
    manifest = Path(root) / "sweep.json"
    manifest.write_text(damage(manifest.read_text()))
    r = run_sweeper(str(root), "--no-plots", module="sweeper.report")
    assert r.returncode == 2 and not (Path(root) / "report.md").exists()
    line = r.stderr.strip().splitlines()[-1]
    assert str(manifest) in line and says in line


def test_an_unreadable_summary_is_named_and_neither_usable_nor_lost(tmp_path):
    root = write_sweep(tmp_path / "s", {"base": [3.0, 3.1, 3.2, 3.05], "new": [2.5, 2.65, 2.62, 2.58]},
                       baseline="base")
    summary = Path(root) / "runs" / "new" / "seed_1" / "summary.json"
    summary.write_text("{garbage")
    text = report_sweep(root, plots=False, options=DecisionOptions(n_resamples=200))
    assert f"WARNING: {summary}: the run summary is not valid JSON" in text
    arm = analyze_sweep(root, options=DecisionOptions(n_resamples=200)).analysis.arms["new"]
    assert (arm.usable, arm.lost, arm.incomplete) == (3, 0, 1)       # not counted against the variant


def test_stale_running_runs_are_shown_as_stale_and_interrupted_ones_by_their_resume_step(tmp_path):
    import subprocess
    import sys

    from sweeper.run.files.owner import process_identity
    from sweeper.run.files.rundir import RunDir

    finals = {"base": [3.0, 3.1, 3.2, 3.05], "new": [2.5, 2.65, 2.62, 2.58]}
    root = write_sweep(tmp_path / "s", finals, baseline="base",
                       status={("new", 2): "running", ("new", 3): "interrupted"})
    dead = subprocess.run([sys.executable, "-c", "from sweeper.run.files.owner import process_identity as p; "
                           "import json; print(json.dumps(p()))"], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parent.parent)
    stale = RunDir(Path(root) / "runs" / "new" / "seed_2")
    stale.update_status(owner=json.loads(dead.stdout))          # a process that has exited: nothing runs it
    live = RunDir(Path(root) / "runs" / "base" / "seed_0")
    live.update_status("running", owner=process_identity())      # this test's own process: alive
    interrupted = RunDir(Path(root) / "runs" / "new" / "seed_3")
    interrupted.ckpt_dir.mkdir(parents=True, exist_ok=True)
    for step in (30, 36):
        (interrupted.ckpt_dir / f"step_{step:08d}.pt").write_bytes(b"x")
    assert interrupted.checkpoint_step() == 36
    text = report_sweep(root, plots=False, options=DecisionOptions(n_resamples=200))
    assert f"note: 1 run(s) stale (the sweeper was killed; nothing runs it); resume with `python -m sweeper.resume " \
           f"{root}`" in text
    md = (Path(root) / "report.md").read_text()
    assert "| 2 | 3.2 | stale @ step 100 (the sweeper was killed; nothing runs it) |" in md
    assert "| 3 | 3.05 | interrupted, resumes from step 36 |" in md            # its checkpoint, not its last log
    runs = analyze_sweep(root, options=DecisionOptions(n_resamples=200)).runs.set_index(["variant", "seed"])
    assert runs.loc[("new", 2), "status"] == "stale" and runs.loc[("new", 3), "resume_step"] == 36
    assert stale.liveness() == "stale" and live.liveness() == "live"
    assert runs.loc[("base", 0), "status"] == "finished"          # its summary says so, whatever the status


def test_sources_table_names_where_each_final_value_was_read():
    """report.md's sources section, built column-wise: a run without the metric is left out, a run without a
    source says run.finish(), a float keeps 4 significant digits; every run through run.finish(): one line."""
    from sweeper.report.markdown import _sources_md
    runs = pd.DataFrame({"variant": ["a", "a", "b"], "seed": [0, 1, 2], "final_loss": [0.123456, math.nan, 2.0],
                         "source_loss": ["out.csv column loss, row 7 (last)", None, None]})
    lines = _sources_md(runs, "loss")
    assert lines[0].startswith("The final `loss` of each run is the last value it reported")
    assert lines[2].splitlines()[2:] == ["| a/seed_0 | 0.1235 | out.csv column loss, row 7 (last) |",
                                         "| b/seed_2 | 2 | run.finish() (the run API) |"]
    assert _sources_md(runs.drop(columns="source_loss"), "loss") == [
        "Every run reported `loss` with run.finish() (the run API)."]
    assert _sources_md(runs, "acc") == ["No run has a final `acc` yet."]

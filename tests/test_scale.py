"""What grows with the number of runs stays linear (issue 16 item 3; figures: benchmarks/bench_scale.py).

    python -m pytest -q tests/test_scale.py
"""
import numpy as np
import pytest

from sweeper.analysis.stats import _better_matrix, bootstrap_delta, resample_counts, weighted_wins


@pytest.mark.parametrize("na, nb, ties", [(3, 3, False), (5, 4, True), (40, 37, True), (200, 300, False),
                                          (1, 5, True), (64, 64, True)])
@pytest.mark.parametrize("lower_is_better", [False, True])
def test_weighted_wins_is_bitwise_the_matrix_form(na, nb, ties, lower_is_better):
    rng = np.random.default_rng(na * 1000 + nb)
    a = rng.integers(0, 5, na).astype(float) if ties else rng.normal(size=na)
    b = rng.integers(0, 5, nb).astype(float) if ties else rng.normal(size=nb)
    for paired in ([False, True] if na == nb else [False]):
        ca = resample_counts(na, 700, rng)                 # 700 rows: more than one cache block at these sizes
        cb = ca if paired else resample_counts(nb, 700, rng)
        reference = np.einsum("ij,ij->i", ca @ _better_matrix(a, b, lower_is_better), cb)   # O(B n_a n_b)
        assert np.array_equal(weighted_wins(a, b, ca, cb, lower_is_better), reference)


def test_bootstrap_p_better_interval_from_the_counts_by_the_definition():
    rng = np.random.default_rng(3)
    a, b = np.round(rng.normal(0.2, 1, 30), 1), np.round(rng.normal(0, 1, 25), 1)     # ties included
    got = bootstrap_delta(a, b, lower_is_better=True, n_resamples=400, seed=5).p_better
    r = np.random.default_rng(5)                          # the same resamples, U counted pair by pair
    ca, cb = resample_counts(a.size, 400, r), resample_counts(b.size, 400, r)
    u = [sum(ca[k, i] * cb[k, j] * (1.0 if a[i] < b[j] else 0.5 if a[i] == b[j] else 0.0)
             for i in range(a.size) for j in range(b.size)) for k in range(400)]
    low, high = np.percentile(np.array(u) / (a.size * b.size), [2.5, 97.5])
    assert (got.low, got.high) == (low, high)


@pytest.mark.parametrize("run_dir, leaves", [("runs/a/seed_0", False), ("/abs/runs/a", True), ("runs/../x", True),
                                             ("..", True), ("runs/a..b/seed_0", False), ("runs//a", False)])
def test_a_manifest_run_dir_outside_the_sweep_dir_is_refused_without_a_path_per_entry(tmp_path, run_dir, leaves):
    import json

    from sweeper.run.files.manifest import MANIFEST, read_manifest
    from sweeper.run.files.reading import UnreadableFile

    (tmp_path / MANIFEST).write_text(json.dumps({
        "experiment": {"name": "x", "baseline": "a", "metric": "m", "lower_is_better": True, "variants": {"a": []}},
        "runs": [{"run_id": "r", "variant": "a", "seed": 0, "run_dir": run_dir}]}))
    if leaves:
        with pytest.raises(UnreadableFile, match="leaves the sweep dir"):
            read_manifest(tmp_path)
    else:
        assert read_manifest(tmp_path).runs[0].run_dir == run_dir


def test_blocked_resampling_at_thousands_of_seeds_agrees_with_scipy(monkeypatch):
    """At 1,000s of seeds the bootstrap and the Monte Carlo permutation test run in bounded blocks of resamples;
    forced into many small blocks here, they still agree with scipy (independent resamples, so within MC error)."""
    import math

    from scipy import stats as sps

    from sweeper.analysis import stats

    monkeypatch.setattr(stats, "_CHUNK", 5_000)             # 25 values per arm: 200+ rows per block, 20+ blocks
    rng = np.random.default_rng(21)
    a, b = rng.normal(0.35, 1, 24), rng.normal(0, 1.3, 25)
    ours = stats.bootstrap_delta(a, b, n_resamples=8_000, seed=2)
    ref = sps.bootstrap((a, b), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis), method="BCa",
                        n_resamples=8_000, rng=3, vectorized=True).confidence_interval
    width = ref.high - ref.low
    assert abs(ours.delta.low - ref.low) < 0.08 * width and abs(ours.delta.high - ref.high) < 0.08 * width
    mean = stats.bootstrap_mean(a, n_resamples=8_000, seed=4)
    ref_mean = sps.bootstrap((a,), np.mean, method="BCa", n_resamples=8_000, rng=5).confidence_interval
    assert abs(mean.low - ref_mean.low) < 0.08 * (ref_mean.high - ref_mean.low)
    perm = stats.permutation_test(a, b, n_resamples=8_000, seed=6)
    assert not perm.exact and perm.n_resamples == 8_000
    ref_p = sps.permutation_test((a, b), lambda x, y, axis=-1: np.abs(x.mean(axis) - y.mean(axis)),
                                 alternative="greater", n_resamples=8_000, rng=7, vectorized=True).pvalue
    assert abs(perm.pvalue - ref_p) < 5 * math.sqrt(ref_p * (1 - ref_p) / 8_000) + 1e-3
    again = stats.bootstrap_delta(a, b, n_resamples=8_000, seed=2)
    assert again == ours                                   # blocks change nothing about reproducibility

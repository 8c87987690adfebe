"""A real mini sweep through the CLI in a subprocess: run dirs, metrics, the table, reproducibility."""
import pytest

from sweeper.run.files.manifest import read_manifest
from sweeper.run.files.rundir import RunDir
from tests.helpers.commands import TINY, run_sweeper

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mini_sweep(tmp_path_factory):
    sweep_dir = tmp_path_factory.mktemp("e2e") / "sweep"
    proc = run_sweeper("+experiment=rope", "seeds=0-1", "~experiment.variants.rope_frozen_qk", *TINY,
                       f"sweeper.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return sweep_dir, proc


def test_the_demo_is_quiet_across_runs(mini_sweep):
    """A healthy sweep of the rope demo: no check across runs finds anything (no false alarm to learn to ignore)."""
    sweep_dir, proc = mini_sweep
    assert "checks across runs" not in proc.stdout and "INTEGRITY" not in proc.stdout, proc.stdout[-3000:]
    assert "## Checks across runs\n\nNone: no check found anything" in (sweep_dir / "report.md").read_text()


def test_run_dirs_hold_everything(mini_sweep):
    sweep_dir, _ = mini_sweep
    manifest = read_manifest(sweep_dir)
    assert {(r.variant, r.seed) for r in manifest.runs} == {("rope", 0), ("rope", 1), ("nope", 0), ("nope", 1)}
    for entry in manifest.runs:
        rd = manifest.run_dir(sweep_dir, entry)
        for path in (rd.config_path, rd.status_path, rd.metrics_path, rd.summary_path, rd.env_path, rd.log_path):
            assert path.is_file(), f"{path} missing"
        assert rd.read_status().status == "finished" and rd.read_status().run_id == entry.run_id
        summary = rd.read_summary()
        assert summary.status == "finished" and summary.steps == 20
        assert summary.run_id == entry.run_id
        assert summary.fingerprint["corpus_hash"]             # the corpus hash is recorded in every run
        metrics, bad = rd.read_metrics()
        assert bad == 0 and [m["step"] for m in metrics] == [5, 10, 15, 20]
        assert {"train_loss", "grad_norm", "lr", "tokens_per_s"} <= set(metrics[0])
        assert metrics[-1]["val_loss"] == pytest.approx(summary.final["val_loss"])


def test_terminal_table_names_every_variant_and_the_sweep_dir(mini_sweep):
    sweep_dir, proc = mini_sweep
    out = proc.stdout
    assert "rope" in out and "nope" in out
    assert str(sweep_dir) in out
    assert (sweep_dir / "summary.csv").is_file() and (sweep_dir / "report.md").is_file()


def _rundir(sweep_dir, variant, seed) -> RunDir:
    return RunDir(sweep_dir / "runs" / variant / f"seed_{seed}")


def _final(sweep_dir, variant, seed):
    return _rundir(sweep_dir, variant, seed).read_summary().final


def test_same_seed_twice_gives_identical_metrics(mini_sweep, tmp_path):
    """Bitwise-equal metrics for the same seed (same thread count: CPU float sums depend on it)."""
    sweep_dir, _ = mini_sweep
    again = tmp_path / "again"
    proc = run_sweeper("+experiment=rope", "seeds=1", "~experiment.variants.rope_frozen_qk",
                       "~experiment.variants.nope", *TINY, f"sweeper.dir={again}", "sweeper.report=false",
                       "launcher.threads_per_run=1",      # same thread count as in the 2-slot sweep
                       "sweeper.reuse=false")             # trained again, not reused from the first sweep
    assert proc.returncode == 0, proc.stderr
    first, _ = _rundir(sweep_dir, "rope", 1).read_metrics()
    second, _ = _rundir(again, "rope", 1).read_metrics()
    strip = lambda rows: [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in rows]
    assert strip(first) == strip(second)


def test_different_seeds_give_different_metrics(mini_sweep):
    sweep_dir, _ = mini_sweep
    assert _final(sweep_dir, "rope", 0)["val_loss"] != _final(sweep_dir, "rope", 1)["val_loss"]
    assert _final(sweep_dir, "nope", 0)["val_loss"] != _final(sweep_dir, "nope", 1)["val_loss"]

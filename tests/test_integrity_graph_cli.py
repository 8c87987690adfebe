"""Dev A's second-round checks across runs through the real CLI, on the tiny projects of tests/test_integrity_cli.py
edited into new manifestations: a seed folded into two values (seeds 0 and 2 one run), an evaluation that reads the
training data, and the healthy twin that overfits (its validation loss rises late while its training loss falls).

    python -m pytest -q -n 0 tests/test_integrity_graph_cli.py
"""
from __future__ import annotations

import pandas as pd
import pytest

from tests.helpers.integrity_projects import make_project, sweep

pytestmark = pytest.mark.slow
LOGGED = "report(step, val_loss=history[-1])"


def edit(project, old: str, new: str) -> None:
    script = project / "fit.py"
    text = script.read_text()
    assert old in text, text
    script.write_text(text.replace(old, new))


def test_a_seed_folded_into_two_values_is_named_and_the_test_counts_distinct_runs(tmp_path):
    project = make_project(tmp_path / "p", "plain")
    edit(project, "random.Random(a.seed)", "random.Random(a.seed % 2)")
    proc = sweep(project, "seeds=0-3")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "  seeds_no_effect [" in out and "2 distinct runs from 4 seeds" in out, out[-3000:]
    assert "seeds 0 and 2 gave the same run" in out
    md = (project / "sweeps" / "fit" / "report.md").read_text()
    assert "the test counts each distinct run once" in md
    summary = pd.read_csv(project / "sweeps" / "fit" / "summary.csv")
    assert set(summary["usable"].astype(str).str.split("/").str[0]) == {"2"}, summary.to_string()


@pytest.mark.parametrize("bug", [True, False])
def test_an_evaluation_on_the_training_data_is_named_and_its_twin_is_quiet(tmp_path, bug):
    project = make_project(tmp_path / "p", "api")
    train = "val_loss(w)" if bug else "sum((w * x - 2.0 * x) ** 2 for x in xs[:16]) / 16"
    edit(project, LOGGED, f"report(step, val_loss=history[-1], train_loss={train})")
    proc = sweep(project, "seeds=0-2")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    verdicts = [line for line in out.splitlines() if line.startswith("big vs base: ")]
    if bug:
        assert "eval_is_train" in verdicts[0] and "val_loss equals train_loss at every shared step" in out, out[-3000:]
    else:
        assert "checks across runs" not in out, out[-3000:]


def test_a_model_that_overfits_is_not_an_inverted_direction(tmp_path):
    project = make_project(tmp_path / "p", "plain")
    u_shape = "[1.0, 0.8, 0.9, 1.2, 1.5, 1.8][step // 10 - 1]"     # falls, then rises: overfitting
    edit(project, "        history.append(val_loss(w))", f"        history.append({u_shape} + 0.01 * abs(w))")
    edit(project, LOGGED, "report(step, val_loss=history[-1], train_loss=1.0 / step + 0.001 * rng.random())")
    proc = sweep(project, "seeds=0-2")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "checks across runs" not in out and "(invalid" not in out, out[-3000:]

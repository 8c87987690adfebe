"""What the checks across runs (sweeper.analysis.integrity) need at plan time: their names (the keys of
experiment.silence) and the direction a metric's name implies (a loss declared higher-is-better warns at plan time).

    CHECK_NAMES["seeds_no_effect"]          # one line: what the check catches
    implied_direction("val_loss")           # "lower"; "val_acc" -> "higher"; "objective" -> None (no opinion)
    check_direction("val_loss", lower_is_better=False, confirmed=False, where="experiment.lower_is_better")  # a
    #                                                  warning line (None when the name agrees or says nothing)

Torch-free, imports nothing of ours: the config layer checks `experiment:` with it, the analysis layer reads it.
"""
from __future__ import annotations

import re

# Every check across runs, by the name its findings carry (sweeper.analysis.integrity.CHECKS: a check function's
# __name__ is its name). experiment.silence accepts exactly these keys.
CHECK_NAMES: dict[str, str] = {
    "seeds_no_effect": "every seed of a variant gave the same run (finals and curves): the seed never reaches the "
                       "code",
    "change_no_effect": "a variant equals the baseline at every seed (finals and curves): its change never reached "
                        "the code",
    "metric_direction": "the decision metric's curve moves against its declared direction in most runs",
    "budget_confound": "arms that differ in training budget: the examples, tokens or optimizer steps their runs "
                       "consumed (the compute ledger), else their own last steps or a steps/epochs/tokens/time key",
    "selected_final": "the final is the best of the run's evaluations, not the last one",
    "no_spread": "every run of every arm at one value: the metric cannot tell the arms apart",
    "broken_baseline": "the baseline has no usable seed: nothing can be compared with it",
    "evaluation_identity": "an arm evaluated on other data than the baseline (its evaluation fingerprint or size, "
                           "or a changed val/eval/test key)",
    "evaluation_varies_with_seed": "an arm evaluated on other data at each seed (a validation split drawn from the "
                                   "seed)",
    "nondeterminism": "the same config at the same seed gave other numbers (an A/A control, the determinism probe)",
    "eval_is_train": "an evaluation series equal to a training series at every shared step: the evaluation read "
                     "the training data",
    "coarse_metric": "the decision metric's finals sit on a grid too coarse for the number of runs: ties decide",
    "mixed_code": "runs of the sweep on different commits, uncommitted changes or script hashes",
    "shared_checkpoint": "a run loaded a checkpoint another run wrote outside its run dir",
    "writes_outside_run_dir": "runs changed files in the project folder outside their run dirs",
    "key_never_read": "a key set in a variant or the baseline that no run read from its config: the change never "
                      "reached the code",
    "generator_unused": "a generator the run API handed out and no run drew from (no pairing by seed rests on it)",
    "train_subset": "a debug subset or limit left on the training data (a config key or a command flag)",
    "shared_state": "a file one run wrote that a later run read or overwrote (hidden folders included)",
    "several_concerns": "a variant that changes more than one concern (model, optimizer, data, evaluation, budget) "
                        "and is not a declared bundle",
}

# Words of a metric's name (split at '_', '-', '.', '/', digits and camelCase) that say which way is better.
LOWER = frozenset({"loss", "losses", "error", "errors", "err", "perplexity", "ppl", "nll", "mse", "mae", "rmse",
                   "mape", "wer", "cer", "ter", "regret", "bpd", "bpc", "bpb", "fid", "kid", "kl", "divergence",
                   "distance", "cost", "risk", "brier", "ece", "entropy", "xent", "ce", "l1", "l2", "mismatch"})
HIGHER = frozenset({"acc", "accuracy", "score", "return", "returns", "reward", "rewards", "f1", "auc", "auroc",
                    "auprc", "bleu", "rouge", "meteor", "chrf", "precision", "recall", "map", "iou", "miou", "dice",
                    "r2", "top1", "top5", "success", "win", "winrate", "ndcg", "mrr", "psnr", "ssim", "spearman",
                    "pearson", "correlation", "em", "exact", "match", "hit", "hits", "mcc", "kappa", "sharpe",
                    "throughput"})
NEGATED = frozenset({"neg", "negative", "minus", "inv", "inverse"})   # neg_loss, one_minus_acc: no opinion


def words(metric: str) -> list[str]:
    """'val/top1_acc' -> ['val', 'top1', 'acc']; 'evalLoss' -> ['eval', 'loss']; 'bleu4' -> ['bleu4', 'bleu']."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", metric)
    out = [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]
    return out + [w.rstrip("0123456789") for w in out if w[-1].isdigit() and w.rstrip("0123456789")]


def implied_direction(metric: str) -> str | None:
    """'lower' or 'higher' when the metric's name says which way is better; None when it says nothing or both."""
    ws = set(words(metric))
    if ws & NEGATED:
        return None
    lower, higher = bool(ws & LOWER), bool(ws & HIGHER)
    return "lower" if lower and not higher else "higher" if higher and not lower else None


def check_direction(metric: str, lower_is_better: bool, confirmed: bool, where: str) -> str | None:
    """A warning when the name of `metric` reads the other way than declared (unless confirmed), else None. The
    name only warns: the report decides from the runs' own curves (sweeper.analysis.integrity.numbers.direction)."""
    implied = implied_direction(metric)
    declared = "lower" if lower_is_better else "higher"
    if confirmed or implied is None or implied == declared:
        return None
    return (f"{where}: {metric} is declared {declared}-is-better, but its name reads like a "
            f"{'loss or error' if implied == 'lower' else 'accuracy, score or reward'} ({implied} is better): the "
            f"report checks the direction against the runs' own curves; fix the direction, or set "
            f"experiment.confirm_direction=true if {declared} really is better")


def direction_warnings(experiment) -> list[str]:
    """check_direction for the decision metric and every secondary metric of an experiment (its typed record)."""
    found = [check_direction(experiment.metric, experiment.lower_is_better, experiment.confirm_direction,
                             f"experiment.lower_is_better={str(experiment.lower_is_better).lower()}")]
    found += [check_direction(m, d == "lower", experiment.confirm_direction, f"experiment.secondary_metrics.{m}={d}")
              for m, d in experiment.secondary_metrics.items()]
    return [w for w in found if w]

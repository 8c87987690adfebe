"""The experiment a sweep decides, one typed value from conf/experiment/NAME.yaml to the sweep manifest to the report.

    exp = build(Experiment, cfg["experiment"], "experiment")   # the config layer (sweeper.config.sweep.read_experiment)
    manifest.experiment                                         # the same type, read back from the manifest
    Experiment(name="x", baseline="a", metric="loss", lower_is_better=True, variants={"a": [], "b": ["lr=0.1"]})

This dataclass is the schema of `experiment.*` (every key, default, comment and accepted range, once) and the
record the manifest stores (sweeper.run.files.manifest writes and reads it, mapping what older manifests lack).
It lives in the run contract because the manifest does; the config layer checks what needs more than one key
(the baseline is a variant, a metric's name agrees with its direction, experiment.silence names checks).
Built by keyword; name, baseline, metric, lower_is_better and variants have no default: an experiment states
them (a Hydra multirun: hydra.launcher.metric, the plugin's own option). experiment.resources is typed apart
(sweeper.config.schema.ResourcesConf) and recorded as the manifest's `resources`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from sweeper.field_rules import one_of, positive, rule

DIRECTIONS = ("lower", "higher")
DESIGNS = ("auto", "paired", "independent")


@dataclass(frozen=True)
class Experiment:
    """experiment.* (conf/experiment/NAME.yaml, added with +experiment=NAME): what a sweep decides."""
    name: str = rule(must="must be a name of letters, digits, '_', '-' and '.'",   # the sweep dir: sweeps/<name>-<hash>
                     ok=lambda v: bool(re.fullmatch(r"[A-Za-z0-9_.-]+", v)))
    baseline: str                            # the variant every other variant is compared with
    metric: str = rule(must="must be a metric name", ok=bool)   # the decision metric: a key of each run's final metrics
    lower_is_better: bool                    # the metric's direction
    variants: Dict[str, Optional[List[str]]]   # variant name -> overrides (command-line syntax); null = []
    min_effect: Optional[float] = positive(None, null=True, what="number (the smallest effect that matters, in "
                                                                "metric units)")
    secondary_metrics: Dict[str, str] = rule(factory=dict, must="must map metric names to lower or higher (which "
                                             "direction is better)", ok=lambda d: all(v in DIRECTIONS
                                                                                      for v in d.values()))
    hypothesis: Optional[str] = None         # what the sweep tests, in a sentence (the journal's headline)
    notes: Dict[str, str] = field(default_factory=dict)   # variant -> one line: what it tests
    controls: List[str] = field(default_factory=list)     # variants meant to equal another (deliberate A/A controls)
    bundles: List[str] = field(default_factory=list)      # variants that change several things on purpose
    design: str = one_of("auto", DESIGNS)    # paired test by seed or Welch: auto decides
    #   from what the runs recorded (the same data order per seed: the built-in trainer's hashes, or run.generator
    #   ("data_order") of the run API); paired: the experiment declares that a seed fixes the shared randomness
    confirm_direction: bool = False          # true: lower_is_better is right although the metric's name reads the
    #   other way (a loss declared higher-is-better is refused at plan time without it; docs/sweep-integrity.md)
    silence: Dict[str, str] = rule(factory=dict, must="must map names of checks across runs to the reason the "
                                   "report prints", ok=lambda d: all(isinstance(v, str) and v.strip()
                                                                     for v in d.values()))
    #   check name (sweeper.config.integrity.CHECK_NAMES) -> why it does not apply to this experiment (the report
    #   shows the finding, marked silenced)

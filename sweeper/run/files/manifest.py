"""The sweep manifest, SWEEP_DIR/sweep.json: the one owner of that file (the experiment, every planned run, the
launch settings, each variant's changes and resources). Torch-free.

    manifest = read_manifest(sweep_dir)          # sweep.json -> Manifest; None when absent; UnreadableFile if damaged
    manifest.run_dir(sweep_dir, manifest.runs[0])   # the RunDir of a planned run
    write_manifest(sweep_dir, manifest)          # atomic; keys keep their order (the report's order of variants)

manifest.experiment is the one experiment type (sweeper.run.files.experiment.Experiment), the value the config
layer builds from experiment.*: written by experiment_to_dict, read back by _experiment_from, which maps what
older manifests lack explicitly (NOT_RECORDED).
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.run.files.atomic import atomic_write_text
from sweeper.run.files.experiment import DESIGNS, DIRECTIONS, Experiment
from sweeper.run.files.reading import UnreadableFile, json_object, load_json_file
from sweeper.run.files.rundir import RunDir

MANIFEST = "sweep.json"


@dataclass(frozen=True)
class RunEntry:
    run_id: str
    variant: str
    seed: int
    run_dir: str            # relative to the sweep dir
    config_hash: str | None = None


@dataclass(frozen=True)
class Launch:
    """Launch-time settings that change a run's numbers, fixed by the plan (sweep.json `launch`): every fresh,
    resumed or retried run of the sweep gets them, whatever the launcher config or the runs left say."""
    threads_per_run: int | None = None     # OMP/MKL/torch threads of every run; None: not recorded (older sweep)

    def to_dict(self) -> dict:
        return {"threads_per_run": self.threads_per_run}

    @classmethod
    def from_dict(cls, d: Any, path: Path = Path(MANIFEST)) -> "Launch":
        fix = "restore it from a backup, or start the sweep again in a new directory"
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise UnreadableFile(path, f"launch={d!r} is not a JSON object", fix)
        threads = d.get("threads_per_run")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise UnreadableFile(path, f"launch.threads_per_run={threads!r} is not a positive integer", fix)
        unknown = sorted(set(d) - {"threads_per_run"})
        if unknown:
            raise UnreadableFile(path, f"launch has unknown key(s) {', '.join(unknown)} (accepted: threads_per_run)",
                                 fix)
        return cls(threads_per_run=threads)

    def differences(self, other: "Launch") -> list[str]:
        """'key=mine (other: theirs)' for every setting that differs."""
        return [f"{k}={v} (this command: {other.to_dict()[k]})" for k, v in self.to_dict().items()
                if v != other.to_dict()[k]]


@dataclass
class Manifest:
    """sweep.json: everything needed to finish, audit or report a sweep from its directory alone."""
    experiment: Experiment
    runs: list[RunEntry]
    seeds: list[int] = field(default_factory=list)
    variants_hash: str = ""
    overrides: list[str] = field(default_factory=list)
    launcher: dict = field(default_factory=dict)
    task: dict = field(default_factory=dict)          # sweeper.config.task.TaskSpec.to_dict()
    source: str = "sweeper"                           # or "hydra" (written by hydra/launcher=sweeper_pool)
    created: float = field(default_factory=time.time)
    argv: list[str] = field(default_factory=list)
    launch: Launch = field(default_factory=Launch)    # settings that change numbers, fixed by the plan
    variant_seeds: dict[str, list[int]] = field(default_factory=dict)   # variants whose seeds differ from `seeds`
    changes: dict[str, list[dict]] = field(default_factory=dict)   # variant -> its declared changes vs the baseline
    resources: dict[str, dict] = field(default_factory=dict)   # variant -> {"ranks_per_run": N}; none recorded: 1
    extra: dict = field(default_factory=dict)       # ([{override, keys}], sweeper.config.variants.ablation)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("extra",)}
        out["experiment"] = experiment_to_dict(self.experiment)
        out["launch"] = self.launch.to_dict()
        out["variant_seeds"] = {k: list(v) for k, v in self.variant_seeds.items()}
        out["runs"] = [dataclasses.asdict(r) for r in self.runs]
        out["variant_overrides"] = out["experiment"]["variants"]
        return {**self.extra, **out}

    def run_dir(self, sweep_dir: Path, entry: RunEntry) -> RunDir:
        return RunDir(Path(sweep_dir) / entry.run_dir)

    def seeds_of(self, variant: str) -> list[int]:
        """The seeds a variant runs: its own (variant_seeds), else the sweep's."""
        return list(self.variant_seeds.get(variant, self.seeds))


def experiment_to_dict(exp: Experiment) -> dict:
    """sweep.json's `experiment`: every key in the schema's order; design, confirm_direction and silence only
    when they differ from the schema's default (a manifest without them reads them back as those defaults)."""
    out = dataclasses.asdict(exp)
    out["variants"] = {k: list(v or []) for k, v in exp.variants.items()}
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(Experiment) if f.name in OMITTED_WHEN_DEFAULT}
    return {k: v for k, v in out.items() if k not in defaults or v != defaults[k]}


OMITTED_WHEN_DEFAULT = ("design", "confirm_direction", "silence")   # keys written only when set
# What the reader takes for a key a manifest lacks (absent or null). The experiment type has no default for
# baseline, metric and direction, but a manifest may leave them unrecorded (older manifests, a Hydra multirun
# without hydra.launcher.baseline): "" means not recorded, and the report asks for --baseline / --metric; an
# unrecorded direction is read as lower-is-better, as every version has read it. Keys written only when set
# (OMITTED_WHEN_DEFAULT) and those older manifests lack (min_effect, secondary_metrics, hypothesis, notes,
# controls, bundles; `{}`, `[]` and null alike) take the schema's default (sweeper.run.files.experiment), and so
# does a design the schema does not accept. Variants as a list of names are an older manifest's: their overrides
# are the top-level `variant_overrides`.
NOT_RECORDED = {"baseline": "", "metric": "", "lower_is_better": True}


def _experiment_from(d: dict, path: Path) -> Experiment:
    """sweep.json's `experiment` (and, in older manifests, the top-level `variant_overrides`) as the one
    Experiment, built by keyword; UnreadableFile naming the key when it is damaged."""
    fix = "restore it from a backup, or start the sweep again in a new directory"
    exp = d.get("experiment")
    if not isinstance(exp, dict):
        raise UnreadableFile(path, "no 'experiment' object", fix)
    variants = exp.get("variants")
    if isinstance(variants, list):                    # older manifests: names here, overrides beside
        overrides = d.get("variant_overrides") or {}
        variants = {str(v): list(overrides.get(v) or []) for v in variants}
    if not isinstance(variants, dict) or not variants:
        raise UnreadableFile(path, "experiment.variants is missing or empty", fix)
    exp = {**exp, **{k: v for k, v in NOT_RECORDED.items() if exp.get(k) is None}}
    for key, kind in (("name", str), ("baseline", str), ("metric", str), ("lower_is_better", bool)):
        if not isinstance(exp.get(key), kind):
            raise UnreadableFile(path, f"experiment.{key}={exp.get(key)!r} is missing or not a {kind.__name__}", fix)
    if exp["baseline"] and exp["baseline"] not in variants:
        raise UnreadableFile(path, f"experiment.baseline={exp['baseline']!r} is not one of the variants "
                                   f"{', '.join(variants)}", fix)
    given = {}                                        # the optional keys present; the rest: the schema's defaults
    min_effect = exp.get("min_effect")
    if min_effect is not None and (isinstance(min_effect, bool) or not isinstance(min_effect, (int, float))
                                   or not min_effect > 0):
        raise UnreadableFile(path, f"experiment.min_effect={min_effect!r} is not a positive number", fix)
    if min_effect is not None:
        given["min_effect"] = float(min_effect)
    secondary = exp.get("secondary_metrics") or None      # {} or null: none
    if secondary is not None:
        if not isinstance(secondary, dict) or any(v not in DIRECTIONS for v in secondary.values()):
            raise UnreadableFile(path, f"experiment.secondary_metrics={secondary!r} is not a mapping of metric -> "
                                       f"'lower' | 'higher'", fix)
        given["secondary_metrics"] = {str(k): str(v) for k, v in secondary.items()}
    hypothesis, notes = exp.get("hypothesis"), exp.get("notes") or None
    if hypothesis is not None:
        if not isinstance(hypothesis, str):
            raise UnreadableFile(path, f"experiment.hypothesis={hypothesis!r} is not text", fix)
        given["hypothesis"] = hypothesis
    if notes is not None:
        given["notes"] = _texts(notes, "notes", "variant", path, fix)
    for key in ("controls", "bundles"):
        named = exp.get(key) or None
        if named is not None:
            if not isinstance(named, list) or any(v not in variants for v in named):
                raise UnreadableFile(path, f"experiment.{key}={named!r} is not a list of variants", fix)
            given[key] = [str(v) for v in named]
    if exp.get("design") in DESIGNS:
        given["design"] = exp["design"]
    confirm, silence = exp.get("confirm_direction"), exp.get("silence") or None
    if confirm is not None:
        if not isinstance(confirm, bool):
            raise UnreadableFile(path, f"experiment.confirm_direction={confirm!r} is not true or false", fix)
        given["confirm_direction"] = confirm
    if silence is not None:
        given["silence"] = _texts(silence, "silence", "check", path, fix, what="reason")
    return Experiment(name=exp["name"], baseline=exp["baseline"], metric=exp["metric"],
                      lower_is_better=exp["lower_is_better"],
                      variants={str(k): list(v or []) for k, v in variants.items()}, **given)


def _texts(value, key: str, of: str, path, fix: str, what: str = "text") -> dict[str, str]:
    """experiment.<key> as recorded: a mapping of <of> -> text (UnreadableFile naming it otherwise)."""
    if not isinstance(value, dict) or any(not isinstance(v, str) for v in value.values()):
        raise UnreadableFile(path, f"experiment.{key}={value!r} is not a mapping of {of} -> {what}", fix)
    return {str(k): v for k, v in value.items()}


def _manifest_from(d: dict, path: Path) -> Manifest:
    fix = "restore it from a backup, or start the sweep again in a new directory"
    experiment = _experiment_from(d, path)
    variants = experiment.variants
    runs = d.get("runs")
    if not isinstance(runs, list):
        raise UnreadableFile(path, "no 'runs' list", fix)
    entries = []
    for i, r in enumerate(runs):
        try:
            entry = RunEntry(run_id=str(r["run_id"]), variant=str(r["variant"]), seed=int(r["seed"]),
                             run_dir=str(r["run_dir"]), config_hash=r.get("config_hash"))
        except (KeyError, TypeError, ValueError):
            raise UnreadableFile(path, f"runs[{i}] is not a run entry (run_id, variant, seed, run_dir)", fix) from None
        if entry.variant not in variants:
            raise UnreadableFile(path, f"runs[{i}] names variant {entry.variant!r}, which the experiment lacks", fix)
        if entry.run_dir.startswith("/") or ".." in entry.run_dir.split("/"):     # Path's test, without a Path
            raise UnreadableFile(path, f"runs[{i}].run_dir={entry.run_dir!r} leaves the sweep dir", fix)
        entries.append(entry)
    variant_seeds = d.get("variant_seeds") or {}
    if not isinstance(variant_seeds, dict) or any(
            k not in variants or not isinstance(v, list) or not v
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in v)
            for k, v in variant_seeds.items()):
        raise UnreadableFile(path, f"variant_seeds={variant_seeds!r} is not a mapping of variant -> list of seeds", fix)
    known = {f.name for f in dataclasses.fields(Manifest)}
    changes = d.get("changes") or {}
    if not isinstance(changes, dict) or any(
            k not in variants or not isinstance(v, list)
            or any(not isinstance(c, dict) or not isinstance(c.get("override"), str)
                   or not isinstance(c.get("keys", []), list) for c in v)
            for k, v in changes.items()):
        raise UnreadableFile(path, "changes is not a mapping of variant -> [{override, keys}]", fix)
    resources = d.get("resources") or {}
    if not isinstance(resources, dict) or any(
            k not in variants or not isinstance(v, dict) or any(
                not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in v.values())
            for k, v in resources.items()):
        raise UnreadableFile(path, f"resources={resources!r} is not a mapping of variant -> {{ranks_per_run: N}}", fix)
    kwargs = {k: d[k] for k in known - {"experiment", "runs", "extra", "launch", "variant_seeds", "resources"}
              if k in d}
    kwargs["resources"] = {str(k): dict(v) for k, v in resources.items()}
    kwargs["launch"] = Launch.from_dict(d.get("launch"), path)
    kwargs["variant_seeds"] = {str(k): [int(s) for s in v] for k, v in variant_seeds.items()}
    extra = {k: v for k, v in d.items() if k not in known and k != "variant_overrides"}
    return Manifest(experiment=experiment, runs=entries, **kwargs, extra=extra)


def read_manifest(sweep_dir: str | Path) -> Manifest | None:
    """The sweep's manifest; None when there is none; UnreadableFile when sweep.json is damaged."""
    path = Path(sweep_dir) / MANIFEST
    fix = "restore it from a backup, or start the sweep again in a new directory"
    raw = load_json_file(path, "sweep manifest", fix)
    if raw is None:
        return None
    return _manifest_from(json_object(raw, path, "sweep manifest", fix), path)


class ManifestScan:
    """Many sweeps' manifests searched cheaply: each sweep.json read once as bytes (never through a link) and
    parsed at most once, only when its bytes hold one of the wanted values as a JSON string.

        scan = ManifestScan(sweep_dirs)
        for sweep_dir, manifest in scan.naming({"3fa2...", "rope"}): ...
    """

    def __init__(self, sweep_dirs: list[Path]):
        self._raw = {d: _raw_bytes(d) for d in sweep_dirs}
        self._parsed: dict[Path, Manifest | None] = {}

    def naming(self, values: set[str]):
        """(sweep_dir, manifest) for each manifest that may name one of `values` (damaged ones left out)."""
        needles = [json.dumps(v).encode() for v in values]
        for sweep_dir, raw in self._raw.items():
            if not any(n in raw for n in needles):
                continue
            if sweep_dir not in self._parsed:
                try:
                    self._parsed[sweep_dir] = read_manifest(sweep_dir)
                except UnreadableFile:
                    self._parsed[sweep_dir] = None
            if self._parsed[sweep_dir] is not None:
                yield sweep_dir, self._parsed[sweep_dir]


def _raw_bytes(sweep_dir: Path) -> bytes:
    path = Path(sweep_dir) / MANIFEST
    try:
        return b"" if path.is_symlink() else path.read_bytes()
    except OSError:
        return b""


def write_manifest(sweep_dir: str | Path, manifest: Manifest) -> None:
    """Write sweep.json atomically; keys keep their order (the variants' order is the report's order)."""
    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(sweep_dir) / MANIFEST, json.dumps(manifest.to_dict(), indent=2, default=str) + "\n")

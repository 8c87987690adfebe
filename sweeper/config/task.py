"""What a sweep runs: the task of an experiment, `task.entry` (a Python function) or `task.command` (a program).

    spec = parse_task(cfg["task"])          # the composed `task:` block -> TaskSpec (UsageError on bad values)
    check_task(spec)                        # before anything starts: the entry imports, the command exists
    spec.argv(run_dir)                      # what a backend starts for one run, in spec.cwd

    task:                                   # conf/task/train.yaml: the built-in trainer (the default)
      entry: sweeper.train:main                     #   called as main(run) by `python -m sweeper.run sweeper.train:main
      RUN_DIR`
      validate: sweeper.train.checks:validate       #   called with each run's config at plan time (ValueError -> exit
      2)
      preflight: sweeper.train.preflight:preflight_config   # config -> HealthReport, for sweeper.preflight=warn|stop
    task:                                   # your own code: `defaults: [override /task: custom]` in an experiment
      command: [python, train_mlp.py]       #   any program; it calls sweeper.init() (SWEEPER_RUN_DIR is set)
      cwd: null                             #   where it runs; default: the directory the sweep was started in

`python` as the first word of a command is this interpreter (sys.executable), so the run sees the environment
sweeper is installed in. A run's process also finds modules in the task's cwd (it is put on PYTHONPATH).

A command gets the run's config as arguments (spec.argv(run_dir, config)):
    {seed} {lr} {model.width}   any run-config key in a word is replaced by its value (nested keys dotted)
    {run_dir} {out_dir}         the run's directory, and RUN_DIR/out (created; the script's own outputs go there)
    {config_file}               with task.config_file (your script's YAML, the base of the run config): the run's
                                merged copy, RUN_DIR/task_config/NAME.yaml, written as the run starts (`seed` in
                                it only when your file has a top-level seed)
    task.args: flags            appends --key=value for every run-config key (nested: --model.width=32)
    task.args: [seed, lr]       appends --seed=0 --lr=0.01 (those keys only)
Values are written as YAML/JSON scalars (true/false, 0.01, relu); lists and mappings as JSON; null values are
left out. Every command runs through `python -m sweeper.run.command` (sweeper/run/command.py): a script that
calls sweeper.init() owns its run; one that does not gets its final metrics read from what it prints
(task.metrics). A `{key}` that names no run-config key is a UsageError at plan time. In the script of a shell
(`[bash, -c, "python t.py --label {label}"]`) each value is quoted for the shell (sweeper.config.shell_template).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from sweeper.config.composition.task_base import base_file, read_base
from sweeper.config.fields import build
from sweeper.config.import_path import run_entries
from sweeper.config.schema import TaskConf
from sweeper.config.shell_template import quote_in_script, script_index
from sweeper.errors import UsageError

PYTHONS = ("python", "python3")
# The built-in trainer as sweeps recorded it before it moved under the sweeper namespace (top-level `train`,
# `kernels`): a recorded task with exactly these hooks is that trainer (a user's own train:main has other hooks).
LEGACY_BUILTIN = {"entry": "train:main", "validate": "train.config:validate",
                  "preflight": "train.preflight:preflight_config"}
BUILTIN = {"entry": "sweeper.train:main", "validate": "sweeper.train.checks:validate",
           "preflight": "sweeper.train.preflight:preflight_config", "audit": "sweeper.train.audit:audit_resume",
           "preload": ["sweeper.train.loop", "sweeper.kernels", "scipy.special"]}


@dataclass(frozen=True)
class TaskSpec:
    entry: str | None = None                   # "package.module:function", called with the Run
    command: tuple[str, ...] | None = None     # argv of a program (zero glue, or it calls sweeper.init())
    cwd: str = ""                              # absolute working directory of every run
    validate: str | None = None                # "module:function"(config) at plan time
    preflight: str | None = None               # "module:function"(config) -> HealthReport
    audit: str | None = None                   # "module:function"(run_config, work_dir, ...): the resume audit
    preload: tuple[str, ...] = ()              # modules a slot's warm launcher imports before forking runs
    args: str | tuple[str, ...] = "none"       # none | flags | run-config keys: what a command gets as --key=value
    metrics: tuple[str, ...] = ()              # where a command without the run API reports its final metrics
    metrics_prefix: str | None = None          # stdout lines holding metrics start with this
    config_file: str | None = None             # the script's own YAML (absolute): the base of the run config
    config_seed: bool = False                  # that file has a top-level `seed` (the run's seed goes in its copy)

    @property
    def name(self) -> str:
        return self.entry or " ".join(self.command or ())

    def argv(self, run_dir: str | Path, config: dict | None = None, metric: str | None = None) -> list[str]:
        """The command line of one run: an entry through `python -m sweeper.run`, a command through
        `python -m sweeper.run.command` with the run config in its words (see the module docstring); metric:
        the decision metric (a command's large out/ files are read only when they can hold it)."""
        if self.entry:
            return [sys.executable, "-m", "sweeper.run", self.entry, str(run_dir)]
        values = {**flat_config(config or {}), "run_dir": str(run_dir), "out_dir": str(Path(run_dir) / "out")}
        if self.config_file:
            values["config_file"] = str(self.run_config_file(run_dir))
        command = self.command or ()
        script = script_index(command)               # a shell's script: values quoted (config.shell_template)
        words = [_fill(w, values) if i != script else quote_in_script(w, PLACEHOLDER, lambda m: _value(m, values))
                 for i, w in enumerate(command)]
        words += config_flags(config or {}, self.args)
        if words and words[0] in PYTHONS:
            words[0] = sys.executable
        head = [sys.executable, "-m", "sweeper.run.command"]
        for source in self.metrics:
            head += ["--metrics", _fill(source, values)]
        if self.metrics_prefix:
            head += ["--prefix", self.metrics_prefix]
        if self.config_file:
            head += ["--config-file", values["config_file"]] + (["--config-seed"] if self.config_seed else [])
        if metric:
            head += ["--metric", metric]
        return [*head, str(run_dir), "--", *words]

    def run_config_file(self, run_dir: str | Path) -> Path:
        """Where a run's merged copy of task.config_file is written: RUN_DIR/task_config/NAME.yaml."""
        return Path(run_dir) / "task_config" / Path(self.config_file or "config.yaml").name

    def placeholders(self) -> list[str]:
        """The {key} names in the command's words and metrics files."""
        return [m for w in (*(self.command or ()), *self.metrics) for m in PLACEHOLDER.findall(w)]

    def check_placeholders(self, config: dict) -> None:
        """UsageError naming a {key} of the command that is not a key of the run config (nor run_dir, out_dir),
        or a task.args key the run config lacks."""
        known = set(flat_config(config)) | {"run_dir", "out_dir"} | ({"config_file"} if self.config_file else set())
        for name in self.placeholders():
            if name not in known:
                keys = ", ".join(sorted(k for k in known if "." not in k or len(known) < 40))
                raise UsageError(f"task.command: {{{name}}} is not a key of the run config; keys are: {keys}")
        if isinstance(self.args, tuple):
            missing = [k for k in self.args if k not in flat_config(config)]
            if missing:
                raise UsageError(f"task.args: {missing[0]!r} is not a key of the run config; keys are: "
                                 f"{', '.join(sorted(flat_config(config)))}")

    def to_dict(self) -> dict:
        out = asdict(self)
        out["command"] = list(self.command) if self.command else None
        out["preload"] = list(self.preload)
        out["args"] = list(self.args) if isinstance(self.args, tuple) else self.args
        out["metrics"] = list(self.metrics)
        if not self.config_file:             # as recorded before task.config_file existed (same plan hashes)
            del out["config_file"], out["config_seed"]
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "TaskSpec":
        """A task recorded in a sweep's manifest (an older sweep's built-in trainer reads as today's)."""
        if all(d.get(k) == v for k, v in LEGACY_BUILTIN.items()):
            d = {**d, **BUILTIN}
        d = dict(d)
        config_seed = d.pop("config_seed", None)
        return parse_task(d, cwd=d.get("cwd") or os.getcwd(), config_seed=config_seed)


def parse_task(block: dict | None, cwd: str | Path | None = None, config_seed: bool | None = None) -> TaskSpec:
    """The `task:` config block, typed and checked by its schema (sweeper.config.schema.TaskConf; no imports, no
    processes: see check_task); a relative task.cwd is relative to `cwd`. config_seed: as recorded (None: read
    task.config_file to see whether it has a top-level seed)."""
    conf = build(TaskConf, dict(block or {}), "task")
    base = Path(os.path.expanduser(conf.cwd or cwd or os.getcwd()))
    if not base.is_absolute():
        base = Path(cwd or os.getcwd()) / base
    if not base.is_dir():
        raise UsageError(f"task.cwd={str(base)!r}: no such directory")
    config_file = base_file({"config_file": conf.config_file, "cwd": str(base)})
    if config_file is not None and config_seed is None:
        config_seed = "seed" in read_base(config_file)
    return TaskSpec(entry=conf.entry or None, command=tuple(conf.command) if conf.command else None,
                    cwd=str(base.resolve()), validate=conf.validate, preflight=conf.preflight, audit=conf.audit,
                    preload=tuple(conf.preload), args=conf.args if isinstance(conf.args, str) else tuple(conf.args),
                    metrics=tuple(conf.metrics), metrics_prefix=conf.metrics_prefix,
                    config_file=str(config_file) if config_file else None, config_seed=bool(config_seed))


PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w.-]*)\}")


def flat_config(config: dict, prefix: str = "") -> dict:
    """{"model": {"width": 32}, "seed": 0} -> {"model.width": 32, "model": {...}, "seed": 0}."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        out[name] = value
        if isinstance(value, dict):
            out.update(flat_config(value, f"{name}."))
    return out


def format_value(value) -> str:
    """A config value as one argument word: true/false, numbers as Python writes them, lists/mappings as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _value(m: re.Match, values: dict) -> str | None:
    return format_value(values[m.group(1)]) if m.group(1) in values else None


def _fill(word: str, values: dict) -> str:
    return PLACEHOLDER.sub(lambda m: format_value(values[m.group(1)]) if m.group(1) in values else m.group(0), word)


def config_flags(config: dict, args) -> list[str]:
    """--key=value words for task.args: flags (every leaf key, nested dotted) or a tuple of keys; none: []."""
    if args == "none" or not config:
        return []
    flat = flat_config(config)
    keys = [k for k, v in flat.items() if not isinstance(v, dict)] if args == "flags" else list(args)
    return [f"--{k}={format_value(flat[k])}" for k in keys if k in flat and flat[k] is not None]


def python_path(spec: TaskSpec, inherited: str | None = None) -> str:
    """PYTHONPATH of a run: the task's cwd first (the user's modules), then `inherited` (what the sweeper had);
    never sweeper's checkout (sweeper.config.import_path: the `sweeper` package alone, when not installed)."""
    return os.pathsep.join(p for p in (run_entries(spec.cwd, inherited), inherited) if p)


def check_task(spec: TaskSpec, timeout_s: float = 120.0, preflight: bool = True) -> None:
    """Fail before launch when the task cannot start: an entry point (or hook) that does not import in a
    fresh interpreter in the task's cwd, a program that is not found, a Python script that does not exist.
    preflight=False leaves the preflight hook unchecked (a sweep with sweeper.preflight=off never calls it)."""
    with TaskCheck(spec, timeout_s, preflight) as check:
        check.wait()


class TaskCheck:
    """check_task started in the background: the import probe (a fresh interpreter importing the task and its
    hooks, checking their signatures: torch, for the built-in trainer, ~1.5 s) runs while the caller does the
    other checks that start a process (the backend's probes). Start it only once every check that starts
    nothing has passed (sweeper.config.sweep.check_task_started): bad input never starts a process.

        with TaskCheck(spec) as check:       # the probe starts here
            ...                              # the backend's probes
            check.wait()                     # UsageError as check_task; leaving the block kills a probe left running
    """

    def __init__(self, spec: TaskSpec, timeout_s: float = 120.0, preflight: bool = True):
        keys = ("entry", "validate", "preflight") if preflight else ("entry", "validate")
        self.spec, self.timeout_s = spec, timeout_s
        self.hooks = [(key, getattr(spec, key)) for key in keys if getattr(spec, key)]
        self.proc: subprocess.Popen | None = None
        if self.hooks:
            env = {**os.environ, "PYTHONPATH": python_path(spec, os.environ.get("PYTHONPATH"))}
            probe = _PROBE.format(hooks=self.hooks, preload=list(spec.preload))
            self.proc = subprocess.Popen([sys.executable, "-c", probe], cwd=spec.cwd,
                                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         stdin=subprocess.DEVNULL)

    def __enter__(self) -> "TaskCheck":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop a probe still running (an error or Ctrl-C elsewhere); idempotent."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()

    def wait(self) -> None:
        """The probe's verdict and the command's checks: UsageError naming what cannot start."""
        if self.proc is not None:
            try:
                out, err = self.proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                self.close()
                raise UsageError(f"task: importing {', '.join(e for _, e in self.hooks)} took over "
                                 f"{self.timeout_s:.0f}s") from None
            if self.proc.returncode == 3:
                raise UsageError(out.strip().splitlines()[-1])
            if self.proc.returncode != 0:
                tail = (err.strip().splitlines() or [f"exit status {self.proc.returncode}"])[-1]
                raise UsageError(f"task: importing {', '.join(e for _, e in self.hooks)} failed: {tail}")
        check_command(self.spec)


def check_command(spec: TaskSpec) -> None:
    """task.command's program is found (on PATH or in the task's cwd) and a Python script it names exists:
    file checks only, no process (run before the import probe starts)."""
    if not spec.command:
        return
    program = spec.command[0]
    if program not in PYTHONS and shutil.which(program, path=_path_with(spec.cwd)) is None \
            and not (Path(spec.cwd) / program).is_file():
        raise UsageError(f"task.command: program {program!r} not found (on PATH or in {spec.cwd})")
    if program in PYTHONS and len(spec.command) > 1 and spec.command[1].endswith(".py"):
        script = Path(spec.cwd) / spec.command[1]
        if not script.is_file():
            raise UsageError(f"task.command: script {spec.command[1]!r} not found in {spec.cwd} "
                             f"(task.cwd; default: the directory the sweep was started in)")


def _path_with(cwd: str) -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), cwd])


_PROBE = """
import importlib, importlib.util, sys
for key, entry in {hooks!r}:
    module, _, attr = entry.partition(":")
    try:
        mod = importlib.import_module(module)
    except BaseException as e:
        print(f"task.{{key}}={{entry!r}}: module {{module}} does not import ({{type(e).__name__}}: {{e}})")
        sys.exit(3)
    if not callable(getattr(mod, attr, None)):
        print(f"task.{{key}}={{entry!r}}: module {{module}} has no function {{attr}}")
        sys.exit(3)
    from sweeper.run.entry import call_problem      # the signature sweeper calls it with
    problem = call_problem(getattr(mod, attr), key, entry)
    if problem:
        print(problem)
        sys.exit(3)
for module in {preload!r}:   # found, not imported (the warm launchers import them; a failure there starts runs cold)
    try:
        found = importlib.util.find_spec(module) is not None
    except BaseException:
        found = False
    if not found:
        print(f"task.preload: no module named {{module!r}} (in {preload!r}); list modules that task.entry imports")
        sys.exit(3)
"""

"""The README is a front page that stays true: short, its links resolve, every command it shows parses, and the
code map (docs/code-map.md) lists exactly the modules of the tree.

    python -m pytest -q tests/test_docs.py
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from tests.helpers.code_map import listed_modules, render, tree_modules
from tests.helpers.commands import ROOT

README = ROOT / "README.md"


def _commands(text: str) -> list[list[str]]:
    """Every `python -m sweeper...` command in the page's bash blocks, as argv (after `pip install ... &&`)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            line = line.rsplit("&&", 1)[-1].strip()
            if line.startswith("python -m sweeper"):
                out.append(shlex.split(line)[2:])
    return out


def test_the_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move details into docs/"
    assert lines[0] == "# sweeper"


def test_every_local_link_of_the_readme_and_the_docs_resolves():
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_code_map_lists_every_module_and_only_modules_that_exist():
    listed, present = listed_modules(), tree_modules()
    missing, stale = sorted(set(present) - set(listed)), sorted(set(listed) - set(present))
    assert not missing and not stale, (f"not in docs/code-map.md: {missing}; listed but absent: {stale}; "
                                       f"regenerate it: python -m tests.helpers.code_map --write")
    assert len(listed) == len(set(listed))


def test_the_code_map_is_what_the_docstrings_say():
    text = (ROOT / "docs" / "code-map.md").read_text(encoding="utf-8")
    assert render() in text, "docs/code-map.md is out of date: python -m tests.helpers.code_map --write"


SWEEPS = [argv for argv in _commands(README.read_text(encoding="utf-8")) if argv[0] == "sweeper"]
OTHERS = [argv for argv in _commands(README.read_text(encoding="utf-8")) if argv[0] != "sweeper"]


def test_the_readme_shows_the_main_command_first():
    assert SWEEPS and SWEEPS[0] == ["sweeper", "+experiment=rope", "seeds=0-3"]


@pytest.mark.parametrize("argv", SWEEPS, ids=[" ".join(a[1:]) for a in SWEEPS])
def test_every_sweep_command_of_the_readme_composes(argv):
    """The overrides compose into a validated sweep (every variant's run config), as the command would."""
    from sweeper.config.sweep import compose_sweep

    sweep = compose_sweep(argv[1:], start_checks=False)
    assert sweep.experiment.name == "rope" and sweep.variant_configs


@pytest.mark.slow
@pytest.mark.parametrize("argv", OTHERS, ids=[" ".join(a) for a in OTHERS])
def test_every_other_command_of_the_readme_parses(argv, tmp_path):
    """The other commands (report, resume, ...) accept their arguments: their only complaint is the example sweep
    dir that does not exist here, in one line with exit 2 (never a usage error)."""
    proc = subprocess.run([sys.executable, "-m", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert "usage:" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert argv[-1] in proc.stderr                                  # it names the sweep dir it could not find

"""A checkpoint another user owns (or planted in a folder they own) is never loaded: it is a pickle, and loading
it runs their code (issue 40). Real files chowned to another uid (CI runs as root), real processes.

    python -m pytest -q -n 0 tests/test_checkpoint_owner.py
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sweeper.run.checkpoint import checkpoint_path, encode
from tests.helpers.commands import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root (CI runs as root)")
OTHER = 12345
RESUME = """
import sys
import sweeper.run
run = sweeper.run.init(run_dir=sys.argv[1], config={"seed": 0})
state = run.load_checkpoint()
if state is None:
    run.save_checkpoint({"x": 1}, step=1)
print("state", state, flush=True)
"""


class Planted:
    """A checkpoint whose unpickling writes a file: the code a planted checkpoint runs."""

    def __init__(self, proof: str):
        self.proof = proof

    def __reduce__(self):
        return (exec, (f"open({self.proof!r}, 'w').write('code ran')",))


def resume(run_dir, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RESUME, str(run_dir)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


@pytest.mark.parametrize("owned", ["file", "folder"])
def test_a_checkpoint_another_user_planted_is_refused_and_runs_no_code(tmp_path, owned):
    run_dir = tmp_path / "runs" / "a" / "seed_0"
    first = resume(run_dir)
    assert first.returncode == 0 and "state None" in first.stdout, first.stderr
    proof = tmp_path / "pwned"
    path = checkpoint_path(run_dir / "ckpt", 2)
    path.write_bytes(encode({"step": 2, "payload": Planted(str(proof))}))
    os.chown(path if owned == "file" else run_dir / "ckpt", OTHER, OTHER)
    proc = resume(run_dir)
    assert proc.returncode != 0 and not proof.exists()
    line = proc.stderr.strip().splitlines()[-1]
    assert f"refusing to load the checkpoint {path}: uid {OTHER} owns" in line, proc.stderr
    assert "SWEEPER_TRUST_OTHER_USERS_FILES=1" in line


def test_trusting_other_users_files_is_an_opt_in_said_on_stderr(tmp_path):
    run_dir = tmp_path / "run"
    assert resume(run_dir).returncode == 0
    path = checkpoint_path(run_dir / "ckpt", 1)
    os.chown(path, OTHER, OTHER)
    proc = resume(run_dir, SWEEPER_TRUST_OTHER_USERS_FILES="1")
    assert proc.returncode == 0 and "state {'x': 1}" in proc.stdout, proc.stderr
    assert f"WARNING: loading {path}, which uid {OTHER}" in proc.stderr

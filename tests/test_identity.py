"""A run's identity (sweeper.store.identity): changing any one input makes an earlier run another run, and the
difference is named by that input; the environment inputs come from the installation and the run's variables.

    python -m pytest -q -n 0 tests/test_identity.py
"""
from __future__ import annotations

import dataclasses

import pytest

from sweeper.run.observed.envinfo import numbers_env
from sweeper.run.observed.provenance import file_sha256
from sweeper.store.identity import ENV_INPUTS, INPUTS, Inputs, first_difference, run_key


@pytest.fixture
def same(tmp_path):
    (tmp_path / "model.py").write_text("DIM = 8\n")
    env = numbers_env(threads="1")
    code = {"model.py": file_sha256(tmp_path / "model.py")}
    planned = Inputs("task", "cfg", 1, env, sources=("model.py",))
    return tmp_path, planned, Inputs("task", "cfg", 1, dict(env), code=code)


def test_the_same_inputs_are_the_same_run(same):
    cwd, planned, stored = same
    assert first_difference(planned, stored, str(cwd)) is None


@pytest.mark.parametrize("name", ["task", "config", "ranks"])
def test_a_changed_plan_input_is_named(same, name):
    cwd, planned, stored = same
    field = {"task": "task", "config": "config", "ranks": "ranks"}[name]
    changed = dataclasses.replace(stored, **{field: 2 if name == "ranks" else "other"})
    assert first_difference(planned, changed, str(cwd)).startswith(f"{name}: ")
    assert run_key(planned) != run_key(dataclasses.replace(planned, **{field: 2 if name == "ranks" else "x"}))


def test_an_edited_project_file_is_named(same):
    cwd, planned, stored = same
    (cwd / "model.py").write_text("DIM = 16\n")
    assert first_difference(planned, stored, str(cwd)) == "code: model.py changed"


def test_a_new_source_file_of_a_command_project_is_named(same):
    cwd, planned, stored = same
    added = dataclasses.replace(planned, sources=("model.py", "data.py"))
    assert first_difference(added, stored, str(cwd)) == "code: the project's sources differ (data.py)"


@pytest.mark.parametrize("name", ENV_INPUTS)
def test_each_environment_input_is_named(same, name):
    cwd, planned, stored = same
    changed = dataclasses.replace(stored, env={**stored.env, name: "something else"})
    assert first_difference(planned, changed, str(cwd)).startswith(f"{name}: something else -> ")
    assert run_key(planned) != run_key(dataclasses.replace(planned, env=changed.env))


def test_unrecorded_code_or_environment_is_never_the_same_run(same):
    cwd, planned, stored = same
    assert first_difference(planned, dataclasses.replace(stored, code=None), str(cwd)).startswith("code: ")
    assert first_difference(planned, dataclasses.replace(stored, env={}), str(cwd)).startswith("environment: ")


def test_numbers_env_reads_threads_and_determinism_variables():
    env = numbers_env(environ={"OMP_NUM_THREADS": "4", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    assert env["threads"] == "4" and env["determinism"] == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    assert numbers_env(threads="2", environ={"OMP_NUM_THREADS": "4"})["threads"] == "2"
    assert env["torch"] and env["python"] and env["device"]
    assert set(INPUTS) == {"task", "config", "ranks", "code", *env}


def test_sweeper_s_own_code_is_part_of_its_version(tmp_path, monkeypatch):
    """Other sweeper code (an edited checkout, a new seed derivation) is another environment: the `sweeper` input
    carries a digest of our own source files; bytecode caches and other files do not move it."""
    from sweeper.run.observed import envinfo
    pkg = tmp_path / "ownpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "streams.py").write_text("SEED_BITS = 32\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(envinfo, "OWN_PACKAGES", ("ownpkg",))
    first = envinfo.own_code.__wrapped__()
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (pkg / "README.txt").write_text("notes")
    assert envinfo.own_code.__wrapped__() == first
    (pkg / "sub" / "streams.py").write_text("SEED_BITS = 64\n")
    second = envinfo.own_code.__wrapped__()
    assert second != first and second.split("+src.")[0] == first.split("+src.")[0]
    assert numbers_env()["sweeper"] == envinfo.own_code() and "+src." in envinfo.own_code()

"""The GPUs a sweep sees as labs' machines have them (issue 40): a preset CUDA_VISIBLE_DEVICES, GPUs another
process fills, device errors before any process of the user's code.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_gpu_environment.py

A fake nvidia-smi (tests/helpers/fake_gpus.py) replays a real node; CUDA_VISIBLE_DEVICES is set as a user's shell
or a job script sets it. A preset that names a GPU nvidia-smi does not list is a refusal (one line, exit 2, no process
but nvidia-smi, nothing written), never a silent fall back to CPU cores; the usual way to say "no GPU"
(CUDA_VISIBLE_DEVICES='' or -1) is honoured: CPU-core slots, every child sees the empty value, one line says so.
"""
from __future__ import annotations

import json
import shutil

import pytest

from sweeper.cli.sweep import main as sweep_main
from tests.helpers.commands import TINY
from tests.helpers.fake_gpus import FIXTURES, fake_smi_env
from tests.helpers.local_pool import child_env, run, run_dir, sweep_args
from tests.helpers.no_process import run_in_process

REFUSED = [   # (node, CUDA_VISIBLE_DEVICES, what the line says)
    ("pcie_2gpu_2socket", "2,3", "names GPU(s) 2, 3 that nvidia-smi does not list on this node (it lists 0, 1)"),
    ("pcie_2gpu_2socket", "0,5", "names GPU(s) 5 that nvidia-smi does not list"),
    ("pcie_2gpu_2socket", "GPU-00000000-dead", "names GPU(s) GPU-00000000-dead that nvidia-smi does not list"),
    ("pcie_2gpu_2socket", "MIG-11111111-2222", "names GPU(s) MIG-11111111-2222 that nvidia-smi does not list"),
    ("dgx_a100_mig", "MIG-7f7011c0-cec2-e636-65c3-b30e78d8059c", "names GPU(s) MIG-7f7011c0-cec2-e636-65c3"),
]


def _gpus(monkeypatch, node: str, visible: str | None) -> None:
    for key, value in fake_smi_env(node).items():
        monkeypatch.setenv(key, value)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)


def _only_nvidia_smi(started: list) -> bool:
    return all("nvidia-smi" in args for _, args in started)


@pytest.mark.slow
@pytest.mark.parametrize("node, visible, needle", REFUSED, ids=[f"{n}:{v!r}" for n, v, _ in REFUSED])
def test_a_preset_that_leaves_no_real_gpu_is_refused_before_any_process(tmp_path, monkeypatch, node, visible,
                                                                         needle):
    _gpus(monkeypatch, node, visible)
    result = run_in_process(sweep_main, ["+experiment=rope", *TINY, "seeds=0"], cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1, result.stderr
    assert needle in lines[0] and "launcher.cpu_only=true" in lines[0], lines[0]
    assert result.written == [] and _only_nvidia_smi(result.started), result.started


ACCEPTED = [   # (node, CUDA_VISIBLE_DEVICES, the launcher.devices=... that pins the same GPUs, as the pool sees them)
    ("pcie_2gpu_2socket", "1", ["1"]),
    ("pcie_2gpu_2socket", "GPU-c24e9d10", ["1"]),                      # a unique UUID prefix
    ("dgx_a100_mig", "MIG-dbb8b29d-3a4e-61f7-0063-ae4f609f9cb7", ["MIG-dbb8b29d-3a4e-61f7-0063-ae4f609f9cb7"]),
    ("dgx_a100_mig", "3,2", ["3", "2"]),
]


@pytest.mark.parametrize("node, visible, ids", ACCEPTED, ids=[f"{n}:{v}" for n, v, _ in ACCEPTED])
def test_the_plan_time_check_and_the_pool_agree_on_the_visible_gpus(monkeypatch, node, visible, ids):
    """The plan's check (LocalBackend.check_machine / launch_settings) and the pool's slots come from one function:
    a preset the check accepts gives the pool exactly those GPUs, and a device the preset hides is refused."""
    from sweeper.backends.local.backend import LocalBackend
    from sweeper.backends.local.schema import LocalLauncherConf
    from sweeper.backends.local.slots import make_slots
    from sweeper.errors import UsageError

    _gpus(monkeypatch, node, visible)
    LocalBackend().check_machine(LocalLauncherConf())
    assert [s.gpu for s in make_slots(LocalLauncherConf(), n_runs=8)] == ids
    with pytest.raises(UsageError, match="are not visible"):
        make_slots(LocalLauncherConf(devices=["0"] if "0" not in ids else ["7"]), n_runs=1)


def _busy_node(tmp_path, used_mib: dict[int, int]) -> dict:
    """A 2-GPU node whose GPUs hold used_mib MiB of another process's memory (of 49140 MiB each)."""
    prefix = tmp_path / "busy"
    for part in ("L.txt", "topo.txt"):
        shutil.copy(FIXTURES / f"pcie_2gpu_2socket_{part}", f"{prefix}_{part}")
    (tmp_path / "busy_mem.csv").write_text("".join(f"{i}, {used_mib.get(i, 3)}, 49140\n" for i in range(2)))
    return {**fake_smi_env("pcie_2gpu_2socket"), "NVIDIA_SMI_FIXTURE": str(prefix)}


@pytest.mark.slow
def test_runs_avoid_a_gpu_another_process_fills_and_name_it(tmp_path):
    """GPU 0 holds 40 GB of someone else's: both runs go to GPU 1, and the log says why (a real sweep; each
    child records the CUDA_VISIBLE_DEVICES it got)."""
    env = child_env(_busy_node(tmp_path, {0: 40000}))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = run(sweep_args(tmp_path / "s", steps=5), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for variant in ("rope", "nope"):
        recorded = json.loads((run_dir(tmp_path / "s", variant, 0) / "env.json").read_text())
        assert recorded["cuda_visible_devices"] == "1", recorded
    out = proc.stdout + proc.stderr
    assert "another process fills gpu0 (39.1 of 48.0 GiB in use): runs go to gpu1 only" in out, out


@pytest.mark.slow
@pytest.mark.parametrize("visible", ["", "-1"])
def test_no_gpu_said_the_usual_way_is_honoured_on_a_gpu_node(tmp_path, visible):
    """CUDA_VISIBLE_DEVICES='' (or -1) on a 2-GPU node: the runs go to CPU-core slots, each child sees the empty
    value, and one line says so (issue 48)."""
    env = {**child_env(fake_smi_env("pcie_2gpu_2socket")), "CUDA_VISIBLE_DEVICES": visible}
    proc = run(sweep_args(tmp_path / "s", steps=5), env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for variant in ("rope", "nope"):
        recorded = json.loads((run_dir(tmp_path / "s", variant, 0) / "env.json").read_text())
        assert recorded["cuda_visible_devices"] == "", recorded
    out = proc.stdout + proc.stderr
    line = f"CUDA_VISIBLE_DEVICES={visible!r} (set in your environment) hides this node's 2 GPU(s): runs go to " \
           "CPU-core slots only"
    assert out.count(line) == 1, out[-3000:]
    assert " on cpu0 " in out and " on gpu" not in out, out[-3000:]


def test_a_busy_gpu_named_by_launcher_devices_is_used_and_named(tmp_path, monkeypatch):
    from sweeper.backends.local.schema import LocalLauncherConf
    from sweeper.backends.local.slots import make_slots

    for key, value in _busy_node(tmp_path, {0: 40000, 1: 45000}).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    notes: list[str] = []
    assert [s.gpu for s in make_slots(LocalLauncherConf(), 2, notes=notes)] == ["0", "1"]   # all busy: used
    assert notes and "gpu0 (39.1 of 48.0 GiB in use), gpu1 (43.9 of 48.0 GiB in use)" in notes[0]
    notes.clear()
    assert [s.gpu for s in make_slots(LocalLauncherConf(devices=["0"]), 2, notes=notes)] == ["0"]
    assert "may run out of memory" in notes[0]
    (tmp_path / "busy_mem.csv").write_text("0, 900, 49140\n1, 3, 49140\n")     # a display server's share: free
    notes.clear()
    assert [s.gpu for s in make_slots(LocalLauncherConf(), 2, notes=notes)] == ["0", "1"] and notes == []


STILL_OPEN = [   # issue 40's "still open": (overrides, what the one line says)
    (["launcher.cores=[]"], "launcher.cores=[]: must be a non-empty list of distinct CPU core ids"),
    (["launcher.cores=[0,0]"], "launcher.cores=[0, 0]: must be a non-empty list of distinct CPU core ids"),
    (["launcher.threads_per_run=1000"], "launcher.threads_per_run=1000: more threads than the"),
    (["model=42"], "model=42: model is a config group: give one of its configs by name: small"),
    (["data=true"], "data=true: data is a config group: give one of its configs by name: stdlib, text"),
    (["launcher.devices=[9]"], "launcher.devices=['9']: device(s) ['9'] are not visible"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", STILL_OPEN, ids=[" ".join(a) for a, _ in STILL_OPEN])
def test_still_open_bad_inputs_are_one_line_before_any_process(tmp_path, monkeypatch, args, needle):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")          # no nvidia-smi: the device error needs no process at all
    result = run_in_process(sweep_main, ["+experiment=rope", *TINY, "seeds=0", *args], cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1 and needle in lines[0], result.stderr
    assert result.started == [] and result.written == []


@pytest.mark.slow
def test_a_device_error_comes_before_the_import_probe_on_a_gpu_node(tmp_path, monkeypatch):
    _gpus(monkeypatch, "pcie_2gpu_2socket", None)
    result = run_in_process(sweep_main, ["+experiment=rope", *TINY, "seeds=0", "launcher.devices=[4]"], cwd=tmp_path)
    assert result.code == 2 and "device(s) ['4'] are not visible (visible: ['0', '1']" in result.stderr
    assert result.started and _only_nvidia_smi(result.started), result.started

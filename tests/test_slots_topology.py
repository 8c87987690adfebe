"""GPU topology in the local pool, with a fake `nvidia-smi` on PATH printing recorded outputs of real nodes
(tests/fixtures/nvidia_smi/: a DGX H100, 8 GPUs on two sockets; a DGX A100 with two GPUs in MIG mode; a
two-socket PCIe box): each GPU slot's cores come from its GPU's near CPU set, MIG instances are slots of their
own, CUDA_VISIBLE_DEVICES may name GPUs by index, UUID (prefix) or MIG UUID; and a real sweep's runs saw it.

Run: ``python -m pytest -q tests/test_slots_topology.py``
"""
import json
import os

import pytest

from sweeper.backends.local.gpu_topology import parse_cpu_list
from sweeper.backends.local.schema import LocalLauncherConf
from sweeper.backends.local.slots import make_slots
from sweeper.errors import UsageError
from tests.helpers.fake_gpus import FIXTURES, fake_smi_env
from tests.helpers.local_pool import child_env, run, run_dir, sweep_args

H100_SOCKETS = (set(parse_cpu_list("0-55,112-167")), set(parse_cpu_list("56-111,168-223")))
A100_NEAR = {0: "48-63,176-191", 1: "48-63,176-191", 2: "16-31,144-159", 3: "16-31,144-159",
             4: "112-127,240-255", 5: "112-127,240-255", 6: "80-95,208-223", 7: "80-95,208-223"}


def uuids(name: str, prefix: str) -> list[str]:
    text = (FIXTURES / f"{name}_L.txt").read_text()
    return [w.rstrip(")") for w in text.split() if w.startswith(prefix)]


def assert_disjoint_equal_threads(slots):
    seen = set()
    for s in slots:
        assert not seen & set(s.cores), s
        seen |= set(s.cores)
    assert len({s.threads for s in slots}) == 1 and slots[0].threads == min(len(s.cores) for s in slots)


def test_parse_cpu_list():
    assert parse_cpu_list("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert parse_cpu_list("N/A") == () and parse_cpu_list("") == () and parse_cpu_list("5-2") == ()


def test_eight_gpus_two_sockets_cores_come_from_each_gpus_socket(node):
    """A contiguous split of 224 cores gives GPU3 cores 84-111: socket 1's, across the interconnect."""
    node("dgx_h100")
    for per_device in (1, 2):
        slots = make_slots(
            LocalLauncherConf(runs_per_device=per_device), 64, environ=os.environ, cores=list(range(224))
        )
        assert [s.gpu for s in slots] == [str(i) for i in range(8)] * per_device
        for s in slots:
            near = H100_SOCKETS[0] if int(s.gpu) < 4 else H100_SOCKETS[1]
            assert set(s.cores) <= near, (s.gpu, s.cores)
            assert len(s.cores) == 112 // (4 * per_device)
        assert_disjoint_equal_threads(slots)
    # launcher.cores restricts to one socket: GPUs 4-7 have no usable near core -> contiguous split, still disjoint
    slots = make_slots(LocalLauncherConf(), 8, environ=os.environ, cores=list(range(56)))
    assert [s.cores for s in slots] == [tuple(range(i * 7, i * 7 + 7)) for i in range(8)]


def test_mig_instances_are_slots_of_their_own(node):
    node("dgx_a100_mig")
    migs = uuids("dgx_a100_mig", "MIG-")
    assert len(migs) == 11
    slots = make_slots(LocalLauncherConf(), 100, environ=os.environ, cores=list(range(256)))
    ids = [s.gpu for s in slots]
    assert ids == migs + ["2", "3", "4", "5", "6", "7"]  # GPU 0 and 1 are only their MIG instances
    for s in slots:
        parent = 0 if s.gpu in migs[:4] else 1 if s.gpu in migs else int(s.gpu)
        assert set(s.cores) <= set(parse_cpu_list(A100_NEAR[parent])), (s.gpu, s.cores)
        env = s.child_env({})
        assert env["CUDA_VISIBLE_DEVICES"] == s.gpu and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert_disjoint_equal_threads(slots)
    # 11 MIG slots share GPU 0/1's NUMA node (32 cores): 2 each; the 6 whole GPUs get 16 each but run 2 threads
    assert {len(s.cores) for s in slots[:11]} == {2, 3} and slots[0].threads == 2


def test_cuda_visible_devices_by_uuid_prefix_and_mig_uuid(node):
    node("dgx_h100")
    gpu = uuids("dgx_h100", "GPU-")
    env = {"CUDA_VISIBLE_DEVICES": f"{gpu[7]},{gpu[0][:12]}"}  # a full UUID, then a unique prefix
    slots = make_slots(LocalLauncherConf(), 8, environ=env, cores=list(range(224)))
    assert [s.gpu for s in slots] == ["7", "0"]
    assert set(slots[0].cores) <= H100_SOCKETS[1] and set(slots[1].cores) <= H100_SOCKETS[0]
    # CUDA would stop at the first entry it cannot resolve and run on fewer GPUs (or none) without a word: an id
    # nvidia-smi does not list is refused instead (issue 40)
    with pytest.raises(UsageError, match=r"names GPU\(s\) GPU-ffff that nvidia-smi does not list"):
        make_slots(LocalLauncherConf(), 8, environ={"CUDA_VISIBLE_DEVICES": "2,GPU-ffff,3"}, cores=list(range(224)))
    notes: list[str] = []        # '' (or -1): "no GPU", honoured: CPU-core slots, named in a note (issue 48)
    assert make_slots(LocalLauncherConf(), 8, environ={"CUDA_VISIBLE_DEVICES": ""}, cores=[0], notes=notes)[0].gpu \
        is None
    assert "runs go to CPU-core slots only" in notes[0]
    assert make_slots(LocalLauncherConf(cpu_only=True), 8, environ={"CUDA_VISIBLE_DEVICES": ""}, cores=[0])[0].gpu \
        is None
    # launcher.devices may name a device by any of its spellings
    slots = make_slots(LocalLauncherConf(devices=[gpu[5], "1"]), 8, environ={}, cores=list(range(224)))
    assert [s.gpu for s in slots] == ["5", "1"]
    node("dgx_a100_mig")
    mig = uuids("dgx_a100_mig", "MIG-")
    slots = make_slots(LocalLauncherConf(), 8, environ={"CUDA_VISIBLE_DEVICES": f"{mig[5]},3"}, cores=list(range(256)))
    assert [s.gpu for s in slots] == [mig[5], "3"]
    assert set(slots[0].cores) <= set(parse_cpu_list(A100_NEAR[1]))
    with pytest.raises(
        UsageError,
        match=r"launcher.devices=\['MIG-nope'\]: device\(s\) \['MIG-nope'\] are not "
        r"visible",
    ):
        make_slots(LocalLauncherConf(devices=["MIG-nope"]), 8, environ={}, cores=[0])


@pytest.mark.slow
def test_a_sweep_on_a_two_socket_node_runs_each_gpu_on_its_own_socket(tmp_path):
    """Real runs under the pool: each records the CUDA_VISIBLE_DEVICES and affinity it started with. The fake
    node's GPU0 hangs off the odd cores' socket, GPU1 off the even ones'; this machine's cores are a subset."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2 or not {0, 1} <= set(cores):
        pytest.skip("needs cores 0 and 1")
    d = tmp_path / "sweep"
    env = child_env(fake_smi_env("pcie_2gpu_2socket"))
    env["NVIDIA_SMI_LOG"] = str(tmp_path / "smi.log")
    proc = run(sweep_args(d, "launcher.cores=[0,1]", steps=10), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = {}
    for variant in ("rope", "nope"):
        rec = json.loads((run_dir(d, variant) / "env.json").read_text())
        seen[rec["cuda_visible_devices"]] = rec["cpu_affinity"]
        assert rec["env"]["OMP_NUM_THREADS"] == "1" and rec["torch_num_threads"] == 1
    near = {"0": [c for c in cores if c % 2 and c < 2], "1": [c for c in cores if c % 2 == 0 and c < 2]}
    assert seen == {g: near[g] for g in seen} and set(seen) == {"0", "1"}, seen  # GPU0 -> core 1, GPU1 -> 0
    assert "topo -m" in (tmp_path / "smi.log").read_text()

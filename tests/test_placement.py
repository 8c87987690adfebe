"""Where the ranks of a multi-rank run go, on recorded `nvidia-smi` outputs of real multi-GPU nodes (a fake
nvidia-smi on PATH, tests/fixtures/nvidia_smi/): a DGX-1 V100 (hybrid cube mesh: NVLink within each quad of
GPUs and between GPU i and i+4, one quad per socket), a 4x RTX A6000 workstation with two NVLink bridges
(0-1, 2-3), a DGX H100 (NVSwitch: all 8 linked, 4 per socket); then the pool itself on CPU slots: a wide run
waiting behind narrow ones is not starved (its slots are reserved), and max_parallel caps runs, not ranks.

Run: ``python -m pytest -q tests/test_placement.py``
"""
import os
import sys
import time

import pytest

from sweeper.backends.failures import RetryPolicy
from sweeper.backends.local.gpu_topology import parse_cpu_list
from sweeper.backends.local.placement import choose, reserve
from sweeper.backends.local.pool import Job, run_pool
from sweeper.backends.local.ranks import rank_env
from sweeper.backends.local.schema import LocalLauncherConf as LauncherConfig
from sweeper.backends.local.slots import Slot, make_slots
from sweeper.backends.progress import Progress
from sweeper.errors import UsageError


def gpus(slots):
    return [s.gpu for s in slots] if slots else None


def free(slots, *busy):
    return [s for s in slots if s.gpu not in {str(b) for b in busy}]


def test_dgx1_a_4_rank_run_gets_a_fully_linked_quad_on_one_socket(node):
    node("dgx1_v100")
    slots = make_slots(LauncherConfig(), 8, environ=os.environ, cores=list(range(80)), ranks=[4, 4])
    assert [s.links for s in slots[:1]] == [("1", "2", "3", "4")]
    first = choose(slots, 4)
    assert gpus(first) == ["0", "1", "2", "3"]
    assert gpus(choose(free(slots, 0, 1, 2, 3), 4)) == ["4", "5", "6", "7"]
    # 0 busy: no linked quad on socket 0 is left; 4-7 are one; a contiguous pick (1,2,3,4) would cross sockets
    assert gpus(choose(free(slots, 0), 4)) == ["4", "5", "6", "7"]
    near = {s.gpu: set(s.cores) for s in slots}
    for s in first:                                 # each rank's cores from its GPU's socket
        assert near[s.gpu] <= set(parse_cpu_list("0-19,40-59"))


def test_dgx1_a_2_rank_run_takes_linked_gpus_of_the_fullest_socket_last(node):
    node("dgx1_v100")
    slots = make_slots(LauncherConfig(), 8, environ=os.environ, cores=list(range(80)), ranks=[2] * 4)
    # socket 0 has 3 free GPUs (1, 2, 3), socket 1 all 4: best fit takes a linked pair of socket 0 and leaves
    # socket 1's quad whole for a 4-rank run
    pair = gpus(choose(free(slots, 0), 2))
    assert pair in (["1", "2"], ["1", "3"], ["2", "3"]) and pair == ["1", "2"]
    # only 0 and 5 free: not linked, two sockets; still placed (distinct GPUs)
    assert gpus(choose(free(slots, 1, 2, 3, 4, 6, 7), 2)) == ["0", "5"]


def test_nvlink_pairs_are_kept_together(node):
    node("ws_4xa6000_nvlink_pairs")
    slots = make_slots(LauncherConfig(), 4, environ=os.environ, cores=list(range(64)), ranks=[2, 2])
    assert gpus(choose(slots, 2)) == ["0", "1"]
    assert gpus(choose(free(slots, 0), 2)) == ["2", "3"]          # not 1+2 (PCIe), though contiguous
    assert gpus(choose(free(slots, 0, 2), 2)) == ["1", "3"]       # no linked pair left: any two
    env = rank_env({"CUDA_VISIBLE_DEVICES": "2"}, 1, 2, 29500, ["2", "3"])
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["LOCAL_RANK"] == "1" and env["WORLD_SIZE"] == "2"


def test_dgx_h100_two_runs_of_4_ranks_one_per_socket_and_ranks_never_share_a_gpu(node):
    node("dgx_h100")
    slots = make_slots(LauncherConfig(runs_per_device=2), 8, environ=os.environ, cores=list(range(224)),
                       ranks=[4] * 4)
    assert len(slots) == 16
    a = choose(slots, 4)
    assert gpus(a) == ["0", "1", "2", "3"]
    b = choose([s for s in slots if s not in a], 4)
    assert gpus(b) == ["4", "5", "6", "7"]
    c = choose([s for s in slots if s not in a + b], 4)          # the second slot of each GPU
    assert sorted(gpus(c)) == ["0", "1", "2", "3"] and len({s.index for s in c} & {s.index for s in a}) == 0
    # GPUs 0-6 busy twice over, 7 twice free: only one device -> no 2-rank run fits
    assert choose([s for s in slots if s.gpu == "7"], 2) is None


def test_a_run_wider_than_the_devices_is_refused(node):
    node("ws_4xa6000_nvlink_pairs")
    with pytest.raises(UsageError, match=r"a run of 8 ranks needs 8 GPUs, one per rank .*; 4 visible"):
        make_slots(LauncherConfig(), 2, environ=os.environ, cores=list(range(64)), ranks=[1, 8])


def test_reserve_picks_the_set_that_drains_first():
    slots = [Slot(i, None, (i,), 1, numa=i // 2) for i in range(4)]
    # slots 0, 1, 3 busy: the 2-rank run waits for (2, 3) (one busy) rather than any pair with two busy
    assert [s.index for s in reserve(slots, {0, 1, 3}, 2)] == [2, 3]
    assert reserve(slots, set(), 5) is None


# -- the pool: reservation and max_parallel with real (tiny, torch-free) processes ----------------------------

SLEEP = ("import os, sys, time; time.sleep(float(sys.argv[1])); "
         "open(sys.argv[2], 'a').write(os.environ.get('RANK', '-') + '\\n')")


class Adapter:
    def settle(self, job, returncode, interrupted, attempt):
        return {"status": "finished" if returncode == 0 else "failed", "code": returncode}, None

    def not_started(self, job, reason):
        return {"status": "pending", "error": reason}


def job(tmp_path, key, ranks, seconds):
    out = tmp_path / f"{key}.out"
    return Job(key=key, label=key, group=key, argv=[sys.executable, "-c", SLEEP, str(seconds), str(out)],
               log_path=tmp_path / f"{key}.log", marker=str(out), ranks=ranks)


class Starts(Progress):
    def __init__(self, total):
        super().__init__(total, stream=open(os.devnull, "w"), live=False)
        self.order, self.at = [], {}

    def started(self, run, slot):
        self.order.append(run.key)
        self.at[run.key] = (time.time(), slot.name)
        super().started(run, slot)


@pytest.mark.slow
def test_a_wide_run_waiting_behind_narrow_ones_is_not_starved(tmp_path):
    """Two CPU slots; queue: a (1 rank, 1.5 s), wide (2 ranks), then six 1-rank runs. Without the reservation
    every 1-rank run would take the slot a leaves free and `wide` would start last."""
    slots = [Slot(0, None, (0,), 1), Slot(1, None, (1,), 1)]
    jobs = [job(tmp_path, "a", 1, 1.5), job(tmp_path, "wide", 2, 0.2)] + \
        [job(tmp_path, f"n{i}", 1, 0.2) for i in range(6)]
    progress = Starts(len(jobs))
    out = run_pool(jobs, slots, Adapter(), RetryPolicy(max_retries=0), progress, tick_s=0.05)
    assert all(o["status"] == "finished" for o in out.values()), out
    assert progress.order[:2] == ["a", "wide"], progress.order
    assert progress.at["wide"][1] == "cpu0+cpu1"
    assert (tmp_path / "wide.out").read_text().split() in (["0", "1"], ["1", "0"])   # both ranks ran
    assert (tmp_path / "n0.out").read_text().split() == ["-"]


@pytest.mark.slow
def test_max_parallel_caps_runs_not_ranks(tmp_path):
    slots = [Slot(i, None, (i % 2,), 1) for i in range(4)]
    jobs = [job(tmp_path, f"r{i}", 2, 0.5) for i in range(3)]
    progress = Starts(len(jobs))
    run_pool(jobs, slots, Adapter(), RetryPolicy(max_retries=0), progress, tick_s=0.05, max_parallel=1)
    t = sorted(progress.at[k][0] for k in progress.order)
    assert t[1] - t[0] >= 0.45 and t[2] - t[1] >= 0.45, t     # one 2-rank run at a time, though 4 slots

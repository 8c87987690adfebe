"""A one-node multi-rank run listens on loopback only (issue 40): torch's TCPStore would listen on every interface
(`::`); two real gloo ranks started as the local pool starts them (its held port, its environment) are checked
through /proc/net/tcp{,6}: every listening socket of rank 0 is on 127.0.0.1 or ::1.

    python -m pytest -q -n 0 tests/test_rank_loopback.py
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sweeper.backends.local.ranks import HeldPort, rank_env
from tests.helpers.commands import ROOT

pytest.importorskip("torch.distributed")
RANK = """
import os
import torch.distributed as dist
from sweeper.run.ranks import Ranks, barrier, init_group
init_group(Ranks.from_env(os.environ), backend="gloo", timeout_s=60)
inodes = set()
for fd in os.listdir("/proc/self/fd"):
    try:
        link = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if link.startswith("socket:["):
        inodes.add(link[8:-1])
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[9] in inodes:                     # 0A: LISTEN
            print("LISTEN", f[1], flush=True)
barrier()
dist.destroy_process_group()
"""
LOOPBACK = ("0100007F", "00000000000000000000000001000000")     # 127.0.0.1 and ::1, as /proc/net writes them


@pytest.mark.slow
def test_a_one_node_two_rank_run_listens_on_loopback_only(tmp_path):
    port = HeldPort()
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TORCHELASTIC_USE_AGENT_STORE"):
            env.pop(var, None)
        procs = [subprocess.Popen([sys.executable, "-c", RANK], env=rank_env(env, r, 2, port.port, [None, None]),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
        outs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        port.close()
    assert [p.returncode for p in procs] == [0, 0], outs
    listening = [line.split()[1] for line in outs[0].splitlines() if line.startswith("LISTEN")]
    assert listening, outs[0]                                   # the store (and gloo's pairs) do listen
    assert all(addr.rsplit(":", 1)[0] in LOOPBACK for addr in listening), listening
    assert any(int(addr.rsplit(":", 1)[1], 16) == port.port for addr in listening), (listening, port.port)

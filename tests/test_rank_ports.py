import pytest

"""MASTER_PORT per run: 50 two-rank runs started at once by the pool, each rank 0 serving its rendezvous on its
run's port as torch's TCPStore does (SO_REUSEADDR, listen) while the pool still holds the port bound, each rank
1 connecting to it: 0 collisions (a collision is a failed bind or a rank 1 reaching another run's rank 0).
Also: a held port is never handed to another bind(0), yet a TCPStore can listen on it.

Run: ``python -m pytest -q tests/test_rank_ports.py``
"""
import json
import os
import socket
import subprocess
import sys

from sweeper.backends.failures import RetryPolicy
from sweeper.backends.local.pool import Job, run_pool
from sweeper.backends.local.ranks import HeldPort
from sweeper.backends.local.slots import Slot
from sweeper.backends.progress import Progress

RENDEZVOUS = r"""
import json, os, socket, sys, time
port, rank, key = int(os.environ["MASTER_PORT"]), int(os.environ["RANK"]), sys.argv[1]
if rank == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port)); s.listen(8)                  # as c10d's TCPStore server: every interface, SO_REUSEADDR
    s.settimeout(60); c, _ = s.accept(); c.sendall(key.encode()); c.close(); s.close()
else:
    deadline = time.time() + 60
    while True:
        try:
            c = socket.create_connection((os.environ["MASTER_ADDR"], port), timeout=5); break
        except OSError:
            if time.time() > deadline: raise
            time.sleep(0.05)
    got = c.recv(256).decode()
    json.dump({"port": port, "got": got}, open(sys.argv[2], "w"))
    sys.exit(0 if got == key else 3)
"""


class Adapter:
    def settle(self, job, returncode, interrupted, attempt):
        return {"status": "finished" if returncode == 0 else "failed", "code": returncode}, None

    def not_started(self, job, reason):
        return {"status": "pending"}


@pytest.mark.slow
def test_fifty_two_rank_runs_starting_at_once_get_fifty_ports_and_no_collision(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    slots = [Slot(i, None, (cores[i % len(cores)],), 1) for i in range(100)]
    jobs = [Job(key=f"run{i}", label=f"run{i}", group="g", ranks=2, marker=str(tmp_path / f"run{i}.json"),
                argv=[sys.executable, "-c", RENDEZVOUS, f"run{i}", str(tmp_path / f"run{i}.json")],
                log_path=tmp_path / f"run{i}.log") for i in range(50)]
    # some other program drawing ports at the same time
    noise = subprocess.Popen([sys.executable, "-c", "import socket\nfor _ in range(20000):\n"
                              " s = socket.socket(); s.bind(('127.0.0.1', 0)); s.close()"])
    progress = Progress(len(jobs), stream=open(os.devnull, "w"), live=False)
    out = run_pool(jobs, slots, Adapter(), RetryPolicy(max_retries=0), progress, tick_s=0.05)
    noise.wait()
    failed = {k: v for k, v in out.items() if v["status"] != "finished"}
    logs = {k: (tmp_path / f"{k}.log").read_text()[-400:] for k in failed}
    assert not failed, logs
    ports = [json.loads((tmp_path / f"run{i}.json").read_text())["port"] for i in range(50)]
    assert len(set(ports)) == 50


def test_a_held_port_is_not_handed_out_but_a_store_can_listen_on_it():
    held = [HeldPort() for _ in range(200)]
    ports = {h.port for h in held}
    drawn = set()
    for _ in range(2000):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        drawn.add(s.getsockname()[1])
        s.close()
    assert not ports & drawn
    import datetime

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", held[0].port, 1, True, datetime.timedelta(seconds=10))
    store.set("k", "v")
    assert store.get("k") == b"v"
    for h in held:
        h.close()

"""Where the ranks of a run go: N free slots on N distinct devices, from one NVLink/NUMA island when there is one.

    slots = choose(free, n)                 # the best n free slots for a run of n ranks, or None: not now
    kept = reserve(all_slots, busy, n)      # the slots the oldest waiting wide run will get: others keep off them

A run of one rank takes the free slot of lowest index (the pool's order, unchanged). A run of n > 1 ranks takes
n slots whose devices are all different (two ranks never share a GPU: NCCL refuses it), scored, best first:
  1. every pair of its GPUs is linked by NVLink (`nvidia-smi topo -m` "NV#"; CPU slots have no links);
  2. the fewest NUMA groups (a GPU's near CPU set; a CPU slot's node), so its ranks' cores sit near its GPUs;
  3. best fit: the fewest free devices left behind in the groups it takes from (a 2-rank run takes the pair of
     a node with 2 free GPUs, not 2 of a node with 4 free, which a 4-rank run may want);
  4. the smallest span of slot indices, then the lowest indices (contiguous cores for CPU ranks).
Every combination of free devices is scored up to MAX_COMBINATIONS; past that (a node of many GPUs, wide runs)
the candidates are taken in (NUMA group, index) order, n at a time.

Waiting wide runs are not starved by narrow ones: the pool reserves, for the oldest ready run that does not fit,
the n slots that need the fewest running runs to end (`reserve`), and starts no other run on them; as those
runs end the reserved set only drains, so the wide run starts as soon as it is free.
"""
from __future__ import annotations

from itertools import combinations
from math import comb

from sweeper.backends.local.slots import Slot

MAX_COMBINATIONS = 20000


def device_of(slot: Slot) -> str:
    """What two ranks of one run must not share: the GPU (its id), or for a CPU slot the slot itself."""
    return slot.gpu if slot.gpu is not None else f"cpu-slot-{slot.index}"


def choose(free: list[Slot], n: int, busy: frozenset[int] = frozenset()) -> list[Slot] | None:
    """The best n slots of `free` on n distinct devices, or None. busy: indices among `free` counted as taken
    (reserve() scores busy slots last); the result is in slot-index order (rank r gets the r-th)."""
    ordered = sorted(free, key=lambda s: (s.index in busy, s.index))
    if n == 1:
        return ordered[:1] or None
    per_device: dict[str, Slot] = {}
    for s in ordered:
        per_device.setdefault(device_of(s), s)       # a device's free slot of lowest index (busy ones last)
    candidates = sorted(per_device.values(), key=lambda s: s.index)
    if len(candidates) < n:
        return None
    if comb(len(candidates), n) <= MAX_COMBINATIONS:
        options = combinations(candidates, n)
    else:
        by_group = sorted(candidates, key=lambda s: (s.numa is None, s.numa or 0, s.index))
        options = (tuple(by_group[i:i + n]) for i in range(len(by_group) - n + 1))
    free_in_group: dict[int | None, int] = {}
    for s in candidates:
        if s.index not in busy:
            free_in_group[s.numa] = free_in_group.get(s.numa, 0) + 1
    best = min(options, key=lambda group: _score(group, busy, free_in_group))
    return sorted(best, key=lambda s: s.index)


def _score(group: tuple[Slot, ...], busy: frozenset[int], free_in_group: dict) -> tuple:
    ids = {device_of(s) for s in group}
    linked = all(device_of(b) in a.links for a, b in combinations(group, 2) if a.gpu is not None)
    linked = linked and all(s.gpu is not None for s in group)
    groups = {s.numa for s in group}
    left = sum(free_in_group.get(g, 0) for g in groups) - sum(s.index not in busy for s in group)
    indices = [s.index for s in group]
    return (sum(s.index in busy for s in group), not linked, len(groups), left, max(indices) - min(indices),
            indices, len(ids))


def reserve(slots: list[Slot], busy: set[int], n: int) -> list[Slot] | None:
    """The n slots a waiting run of n ranks should wait for: on distinct devices, the fewest of them busy,
    then by choose()'s score. None when no n distinct devices exist at all."""
    return choose(slots, n, frozenset(busy))

"""The GPUs of this node as the local pool sees them: whole GPUs and MIG instances, each with its near CPU set.

    devices = discover_devices()            # [Device(id='0', cpus=(0, 1, ..., 55, 112, ...), ...), ...]
    resolve_visible("GPU-5d5b,1", devices)  # CUDA_VISIBLE_DEVICES entries -> the devices they name

Nothing here initialises CUDA. `nvidia-smi -L` lists the GPUs ("GPU 0: NAME (UUID: GPU-...)") and, indented
under a GPU in MIG mode, its MIG instances ("MIG 3g.40gb Device 0: (UUID: MIG-...)"); a MIG instance is a
device of its own, addressed by its MIG UUID, and its GPU is then no device (CUDA cannot use a MIG-mode GPU
whole). `nvidia-smi topo -m` gives each GPU's "CPU Affinity" column (e.g. "0-55,112-167"), the cores of the
socket/NUMA node the GPU hangs off; a MIG instance inherits its GPU's. The same table's GPU-to-GPU cells say
which pairs talk over NVLink ("NV12": 12 bonded links; "SYS", "NODE", "PHB", "PIX": PCIe), so a run of several
ranks can be given GPUs that all reach each other over NVLink (sweeper.backends.local.placement); MIG instances
get none. `--query-gpu=...memory.used,memory.total` says how full each GPU is now (another process's work).
Missing nvidia-smi, a failing call or an unparsable table means no devices / no affinity / no links
(the pool then splits cores contiguously and places ranks by slot order).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU_LINE = re.compile(r"^GPU (\d+): (.*?) \(UUID: (GPU-[^)]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG .*?Device\s+(\d+): \(UUID: (MIG-[^)]+)\)")


@dataclass(frozen=True)
class Device:
    id: str                          # what goes in CUDA_VISIBLE_DEVICES: the GPU index, or the MIG UUID
    gpu_index: int | None            # the physical GPU (nvidia-smi's index); None when unknown
    uuid: str | None                 # GPU-... or MIG-...
    cpus: tuple[int, ...] = ()       # the near CPU set ("CPU Affinity"); () when unknown
    name: str = ""
    nvlink: tuple[int, ...] = ()     # indices of the GPUs this one reaches over NVLink (topo -m "NV#" cells)

    @property
    def aliases(self) -> tuple[str, ...]:
        """Every spelling CUDA_VISIBLE_DEVICES / launcher.devices may use for this device."""
        out = [self.id]
        if self.uuid:
            out.append(self.uuid)
        if self.gpu_index is not None and not (self.uuid or "").startswith("MIG-"):
            out.append(str(self.gpu_index))
        return tuple(dict.fromkeys(out))


def _nvidia_smi(*args: str) -> str:
    if not shutil.which("nvidia-smi"):
        return ""
    try:
        proc = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """"0-3,8,10-11" -> (0, 1, 2, 3, 8, 10, 11); "N/A" or anything else unparsable -> ()."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            return ()
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            return ()
        cpus.extend(range(lo, hi + 1))
    return tuple(sorted(set(cpus)))


def _topo_table(text: str) -> tuple[list[str], dict[int, list[str]]]:
    """`nvidia-smi topo -m` -> (header columns, {gpu index: its row's cells}). Cells are tab-separated; the header
    names the columns (it starts with an empty cell, and may be wrapped in terminal underline escapes)."""
    lines = [_ANSI.sub("", line).rstrip("\n") for line in text.splitlines()]
    header = next((line for line in lines if "CPU Affinity" in line), None)
    if header is None:
        return [], {}
    rows = {int(m.group(1)): [c.strip() for c in line.split("\t")]
            for line in lines if (m := re.match(r"^GPU(\d+)\t", line))}
    return [c.strip() for c in header.split("\t")], rows


def parse_topo_affinity(text: str) -> dict[int, tuple[int, ...]]:
    """`nvidia-smi topo -m` -> {gpu index: near CPU set}."""
    cols, rows = _topo_table(text)
    if "CPU Affinity" not in cols:
        return {}
    at = cols.index("CPU Affinity")
    return {gpu: parse_cpu_list(cells[at]) for gpu, cells in rows.items() if len(cells) > at}


def parse_topo_links(text: str) -> dict[int, tuple[int, ...]]:
    """`nvidia-smi topo -m` -> {gpu index: indices of the GPUs it reaches over NVLink} (cells "NV<n>")."""
    cols, rows = _topo_table(text)
    gpu_cols = {i: int(c[3:]) for i, c in enumerate(cols) if re.fullmatch(r"GPU\d+", c)}
    return {gpu: tuple(sorted(gpu_cols[i] for i in gpu_cols if i < len(cells) and re.fullmatch(r"NV\d+", cells[i])))
            for gpu, cells in rows.items()}


def parse_list(text: str, affinity: dict[int, tuple[int, ...]] | None = None,
               links: dict[int, tuple[int, ...]] | None = None) -> list[Device]:
    """`nvidia-smi -L` (plus topo affinity and NVLink peers) -> devices: each GPU, or its MIG instances."""
    affinity, links = affinity or {}, links or {}
    gpus: list[tuple[int, str, str, list[Device]]] = []
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        g = _GPU_LINE.match(line)
        if g:
            gpus.append((int(g.group(1)), g.group(2), g.group(3), []))
            continue
        m = _MIG_LINE.match(line)
        if m and gpus:
            index, name, _, migs = gpus[-1]
            migs.append(Device(id=m.group(2), gpu_index=index, uuid=m.group(2), cpus=affinity.get(index, ()),
                               name=f"{name} MIG {line.split()[1]}"))
    devices: list[Device] = []
    for index, name, uuid, migs in gpus:
        devices.extend(migs or [Device(id=str(index), gpu_index=index, uuid=uuid, cpus=affinity.get(index, ()),
                                       name=name, nvlink=links.get(index, ()))])
    return devices


def discover_devices() -> list[Device]:
    """This node's devices from nvidia-smi (empty without it)."""
    listing = _nvidia_smi("-L")
    if not listing:
        return []
    topo = _nvidia_smi("topo", "-m")
    return parse_list(listing, parse_topo_affinity(topo), parse_topo_links(topo))


def parse_memory(text: str) -> dict[int, tuple[int, int]]:
    """`nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits` -> {gpu index: (used
    MiB, total MiB)}; rows that do not parse ("[N/A]" on a MIG-mode GPU) are left out."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 3 and all(c.isdigit() for c in cells):
            out[int(cells[0])] = (int(cells[1]), int(cells[2]))
    return out


def discover_memory() -> dict[int, tuple[int, int]]:
    """{gpu index: (used MiB, total MiB)} of this node's GPUs now ({} without nvidia-smi)."""
    return parse_memory(_nvidia_smi("--query-gpu=index,memory.used,memory.total", "--format=csv,noheader,nounits"))


def unknown_entries(value: str, known: list[Device]) -> list[str]:
    """The CUDA_VISIBLE_DEVICES entries that name no device nvidia-smi lists (none when it lists
    no device: there is nothing to check them against, and they are passed on as they are)."""
    return [e for e in (e.strip() for e in value.split(",")) if e and not resolve_visible(e, known)]


def resolve_visible(value: str, known: list[Device]) -> list[Device]:
    """CUDA_VISIBLE_DEVICES -> devices, in its order. An index names the GPU (or, for a MIG-mode GPU, its MIG
    instances); a GPU UUID or unique prefix of one names that GPU; a MIG UUID names that instance. An id
    nvidia-smi does not know is kept as it is, without topology. CUDA stops at the first invalid entry; so
    does this, keeping the entries before it."""
    out: list[Device] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        if entry.isdigit():
            match = [d for d in known if d.gpu_index == int(entry)]
        else:
            match = [d for d in known if d.uuid == entry] or \
                    [d for d in known if d.uuid and d.uuid.startswith(entry) and entry.startswith(("GPU-", "MIG-"))]
            if entry.startswith("GPU-") and len({d.gpu_index for d in match}) > 1:
                match = []   # an ambiguous prefix: CUDA refuses it
        if not known:
            out.append(Device(id=entry, gpu_index=int(entry) if entry.isdigit() else None,
                              uuid=None if entry.isdigit() else entry))
        elif match:
            out.extend(d for d in match if d not in out)
        else:
            break
    return out

"""A newcomer's install: README's first command, verbatim, in a fresh venv and a fresh copy of the checkout.

    python benchmarks/bench_install.py              # install, then the first command shortened to a tiny sweep
    python benchmarks/bench_install.py --full       # install, then the first command exactly as README has it

The venv has no system site-packages: everything the command needs is fetched as a newcomer's pip fetches it
(this machine's pip config and indexes; docs/install.md says what differs from a normal machine). Reported: the
install's wall time (the command up to `python -m sweeper`), the bytes of every archive pip fetched (read from
pip's own log, PIP_LOG: `Downloading URL (size)` and local `Processing PATH` lines), the packages installed, and
that none is a CUDA one (nvidia-*, cuda-*, triton); then the sweep's exit status and wall time.
Writes benchmarks/results/bench_install.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._results import write_results  # noqa: E402
from tests.helpers.commands import TINY  # noqa: E402

SHIPPED = ("sweeper", "train", "kernels", "conf", "hydra_plugins", "pyproject.toml", "README.md")
CUDA = re.compile(r"^(nvidia-|cuda-|triton$)")
UNITS = {"kB": 1e3, "MB": 1e6, "GB": 1e9, "bytes": 1.0}


def readme_first_command() -> str:
    """The first line of README's quickstart block."""
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash\n", 1)[1]
    return block.splitlines()[0].split("   #")[0].strip()


def fetched(log: str) -> dict[str, int]:
    """archive -> bytes, from pip's log: remote downloads with their size, local archives by their file."""
    out = {}
    for m in re.finditer(r"Downloading (\S+) \(([\d.]+) (kB|MB|GB|bytes)\)", log):
        out[m.group(1).rsplit("/", 1)[-1]] = int(float(m.group(2)) * UNITS[m.group(3)])
    for m in re.finditer(r"Processing (/\S+\.(?:whl|tar\.gz|zip))", log):
        path = Path(m.group(1))
        if path.is_file():
            out[path.name] = path.stat().st_size
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the sweep exactly as README has it (minutes)")
    p.add_argument("--out", default=None, help="work folder (default: a temporary one, removed)")
    p.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args(argv)
    work = Path(args.out or tempfile.mkdtemp(prefix="bench-install-"))
    checkout, venv = work / "checkout", work / "venv"
    for name in SHIPPED:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, checkout / name)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(venv), PIP_NO_CACHE_DIR="1",
               PIP_LOG=str(work / "pip.log"), SWEEPER_PROGRESS="plain")
    command = readme_first_command()
    install, _, sweep = command.rpartition(" && ")
    assert sweep.startswith("python -m sweeper"), command
    t0 = time.time()
    proc = subprocess.run(["bash", "-c", install], cwd=checkout, env=env, capture_output=True, text=True)
    install_s = time.time() - t0
    if proc.returncode != 0:
        raise SystemExit(f"install failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"], env=env,
                            capture_output=True, text=True, check=True)
    packages = {d["name"].lower(): d["version"] for d in json.loads(listed.stdout)}
    archives = fetched((work / "pip.log").read_text(errors="replace"))
    sweep_cmd = sweep if args.full else f"{sweep} {' '.join(TINY)}"
    t0 = time.time()
    ran = subprocess.run(["bash", "-c", sweep_cmd], cwd=checkout, env=env, capture_output=True, text=True)
    sweep_s = time.time() - t0
    result = {
        "command": command, "install_s": round(install_s, 1), "fetched_bytes": sum(archives.values()),
        "fetched": archives, "packages": packages, "torch": packages.get("torch"),
        "cuda_packages": sorted(n for n in packages if CUDA.match(n)), "sweep": sweep_cmd,
        "sweep_exit": ran.returncode, "sweep_s": round(sweep_s, 1), "load_avg_1m": os.getloadavg()[0],
        "cores": os.cpu_count(),
    }
    big = sorted(archives.items(), key=lambda kv: -kv[1])[:5]
    md = [
        "# A fresh-venv install: README's first command (`python benchmarks/bench_install.py"
        + (" --full" if args.full else "") + "`)", "",
        f"`{command}`", "",
        f"- install (up to `python -m sweeper`): {install_s:.0f} s, {result['fetched_bytes'] / 1e6:.0f} MB fetched "
        f"in {len(archives)} archives, {len(packages)} packages; torch {result['torch']}",
        f"- CUDA packages (nvidia-*, cuda-*, triton): {', '.join(result['cuda_packages']) or 'none'}",
        "- largest archives: " + ", ".join(f"{n} {b / 1e6:.0f} MB" for n, b in big),
        f"- then `{sweep_cmd}`: exit {ran.returncode} in {sweep_s:.0f} s",
        f"- {result['cores']} cores, load average {result['load_avg_1m']:.1f} at the end",
    ]
    write_results(args.results, "bench_install", result, md)
    print("\n".join(md))
    if ran.returncode != 0:
        print((ran.stdout + ran.stderr)[-3000:], file=sys.stderr)
    if not args.out:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ran.returncode == 0 and not result["cuda_packages"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""A plain Hydra app whose jobs train data-parallel: each job is hydra.launcher.ranks_per_run processes with
torchrun's variables; the task function joins the process group itself (gloo), all-reduces rank + 1 and returns
the sum (3.0 for 2 ranks) plus the seed, so a test sees every rank took part and rank 0's value came back.

    python ddp_app.py -m seed=0,1 hydra/launcher=sweeper_pool hydra.launcher.ranks_per_run=2
"""
import json
import os

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

ConfigStore.instance().store(name="config", node={"seed": 0})


@hydra.main(version_base=None, config_name="config")
def train(cfg: DictConfig):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    with open(os.path.join(HydraConfig.get().runtime.output_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": dist.get_world_size(), "port": os.environ["MASTER_PORT"],
                   "pid": os.getpid(), "sum": x.item()}, f)
    dist.destroy_process_group()
    return x.item() + cfg.seed


if __name__ == "__main__":
    train()

"""A PyTorch Lightning script as it would be without sweeper: argparse options in, CSVLogger's metrics.csv out
(OUT/lightning_logs/version_0/metrics.csv). A small MLP fits a fixed synthetic regression.

    python train_lightning.py --out out --seed 0 --lr 0.01 --hidden 32 --max_epochs 3
"""
import argparse

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset


class Regressor(pl.LightningModule):
    def __init__(self, hidden: int, lr: float):
        super().__init__()
        self.lr = lr
        self.net = torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)               # fixed data: the seed only sets init and order
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, (x.sin().sum(1, keepdim=True) + 0.1 * torch.randn(n, 1, generator=g)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--max_epochs", type=int, default=3)
    args = p.parse_args()
    pl.seed_everything(args.seed)                       # init and data order from the seed, in every arm
    trainer = pl.Trainer(max_epochs=args.max_epochs, logger=CSVLogger(args.out), accelerator="cpu", devices=1,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         log_every_n_steps=4)
    trainer.fit(Regressor(args.hidden, args.lr), DataLoader(data(512, 1), batch_size=32, shuffle=True),
                DataLoader(data(128, 2), batch_size=64))


if __name__ == "__main__":
    main()

"""A Hugging Face Trainer script as it would be without sweeper: HfArgumentParser options in, the Trainer's own
files out (all_results.json, eval_results.json, trainer_state.json in --output_dir). A tiny GPT-2 built from a
config (no download) learns synthetic sequences (each token the previous plus one, modulo the vocabulary).

    python train_hf.py --output_dir out --seed 0 --learning_rate 0.001 --max_steps 30
"""
from dataclasses import dataclass

import torch
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments, set_seed


@dataclass
class ModelArguments:
    n_embd: int = 32            # width of the tiny GPT-2
    n_layer: int = 1
    vocab: int = 16
    length: int = 12            # tokens per sequence
    n_train: int = 256          # synthetic sequences (fixed: the data never depends on the seed)
    n_eval: int = 64


class Counting(torch.utils.data.Dataset):
    """Sequences start, start+1, ... (mod vocab), from a fixed generator: the same data for every run."""

    def __init__(self, n: int, vocab: int, length: int, seed: int):
        starts = torch.randint(0, vocab, (n, 1), generator=torch.Generator().manual_seed(seed))
        self.ids = (starts + torch.arange(length)) % vocab

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> None:
    margs, args = HfArgumentParser((ModelArguments, TrainingArguments)).parse_args_into_dataclasses()
    set_seed(args.seed)                       # the seed fixes the init here and the data order in the Trainer
    config = GPT2Config(vocab_size=margs.vocab, n_positions=margs.length, n_embd=margs.n_embd,
                        n_layer=margs.n_layer, n_head=2)
    trainer = Trainer(model=GPT2LMHeadModel(config), args=args,
                      train_dataset=Counting(margs.n_train, margs.vocab, margs.length, 1234),
                      eval_dataset=Counting(margs.n_eval, margs.vocab, margs.length, 4321))
    trainer.train()
    metrics = trainer.evaluate()
    trainer.save_metrics("eval", metrics)     # eval_results.json and all_results.json
    trainer.save_state()                      # trainer_state.json: the log history
    trainer.save_model()                      # config.json, model.safetensors: not metrics, never read as such


if __name__ == "__main__":
    main()

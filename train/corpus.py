"""Character-level corpora: the embedded default (the stdlib's own sources) or a user's text file.

    corpus = load_corpus(DataConfig(kind="stdlib", n_files=60))
    corpus.train, corpus.val   # np.uint16 token ids;  corpus.vocab: the characters;  corpus.sha256

Pure Python + numpy (no torch), so the sweeper parent can validate `data.path` before anything starts.
No downloads: the stdlib corpus is read from this Python's own `Lib/*.py`, in sorted order.
"""
from __future__ import annotations

import hashlib
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sweeper.train.config import ConfigError, DataConfig

MIN_CHARS = 1000  # below this a train/validation split is meaningless


@dataclass(frozen=True)
class Corpus:
    text_sha256: str
    vocab: str              # sorted distinct characters; token id = index
    train: np.ndarray       # (N_train,) uint16 token ids
    val: np.ndarray         # (N_val,) uint16 token ids
    source: str             # where the text came from

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)


def stdlib_files(n_files: int) -> list[Path]:
    """The first n_files of this Python's Lib/*.py in sorted order (the default corpus)."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in lib.glob("*.py") if p.is_file())
    if not files:
        raise ConfigError(f"data.kind=stdlib: no *.py files found in {lib}; use data=text data.path=FILE")
    return files[:n_files]


def read_text_file(path: str | Path) -> str:
    """Read a user's corpus; a missing, empty or non-text file raises ConfigError naming data.path."""
    p = Path(os.path.expanduser(path))
    if not p.is_file():
        what = "a folder, not a file" if p.is_dir() else "not a regular file" if p.exists() else "no such file"
        raise ConfigError(f"data.path={path}: {what} (give a UTF-8 text file)")
    raw = p.read_bytes()
    if not raw.strip():
        raise ConfigError(f"data.path={path}: the file is empty (give a UTF-8 text file of at least "
                          f"{MIN_CHARS} characters)")
    if b"\x00" in raw[:65536]:
        raise ConfigError(f"data.path={path}: not a text file (it holds NUL bytes); give a UTF-8 text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"data.path={path}: not UTF-8 text (byte {e.start}); give a UTF-8 text file") from None
    if len(text) < MIN_CHARS:
        raise ConfigError(f"data.path={path}: only {len(text)} characters; need at least {MIN_CHARS}")
    return text


def corpus_text(cfg: DataConfig) -> tuple[str, str]:
    """(text, source description) for a data config."""
    if cfg.kind == "stdlib":
        files = stdlib_files(cfg.n_files)
        text = "".join(f.read_text(encoding="utf-8", errors="replace") for f in files)
        return text, f"stdlib:{files[0].parent} ({len(files)} files, {files[0].name}..{files[-1].name})"
    if cfg.kind == "text":
        if not cfg.path or cfg.path == "???":
            raise ConfigError("data.path is required with data=text: data=text data.path=/path/to/corpus.txt")
        return read_text_file(cfg.path), f"file:{Path(os.path.expanduser(cfg.path)).resolve()}"
    raise ConfigError(f"data.kind={cfg.kind!r}: accepted values are stdlib, text")


def load_corpus(cfg: DataConfig) -> Corpus:
    text, source = corpus_text(cfg)
    vocab = "".join(sorted(set(text)))
    if len(vocab) > 65535:
        raise ConfigError(f"data: {len(vocab)} distinct characters; at most 65535 are supported")
    codepoints = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)                 # (N,)
    table = np.frombuffer(vocab.encode("utf-32-le"), dtype=np.uint32)                     # (V,) sorted
    ids = np.searchsorted(table, codepoints).astype(np.uint16)                            # (N,)
    n_val = max(int(len(ids) * cfg.val_fraction), 2)
    return Corpus(text_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), vocab=vocab,
                  train=ids[:-n_val], val=ids[-n_val:], source=source)

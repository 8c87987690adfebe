"""Environment references in a config stay references on disk: `${oc.env:WANDB_API_KEY}` (the usual Hydra way to
pass a secret) is resolved in the run's own process only; config.yaml, the sweep manifest, the identity hashes and a
command's arguments hold the reference, never the value. So no secret is written, and rotating one does not
start a new sweep.

    keep_env_refs(cfg, skip=("sweeper", "launcher"))    # a DictConfig, before to_container(resolve=True)
    resolve_env_refs("--key=${oc.env:WANDB_API_KEY}")   # in the run's process: "--key=<the value>"
    as_written(sys.argv)                                # the words as written (what env.json records)

A string value that holds `${oc.env:...}` anywhere (`Bearer ${oc.env:TOKEN}`, `${oc.decode:${oc.env:N}}`) is
kept whole, escaped so that resolving the config leaves it as written; a key interpolating it (`${a.key}`) gets
the reference too. A typed value that is not a string (an int from `${oc.env:NGPU}`) is resolved where the
config is composed. run.config (an OmegaConf DictConfig) resolves the references when the run reads them.
"""
from __future__ import annotations

ENV_REF = "${oc.env:"
_WRITTEN: dict[str, str] = {}        # a resolved word -> the word as written (with its reference)


def keep_env_refs(cfg, skip: tuple[str, ...] = ()) -> None:
    """Escape, in place, every string value of the DictConfig `cfg` that holds an environment reference
    (top-level keys in `skip` are left alone: settings sweeper itself resolves, e.g. sweeper.dir)."""
    from omegaconf import DictConfig  # deferred: omegaconf (0.1 s), only when a config is composed or written
    from omegaconf.errors import OmegaConfBaseException
    from omegaconf.nodes import ValueNode

    def walk(node, top: bool) -> None:
        keys = list(node.keys()) if isinstance(node, DictConfig) else range(len(node))
        for key in keys:
            if top and key in skip:
                continue
            child = node._get_node(key)
            if isinstance(child, ValueNode):
                raw = child._value()
                if isinstance(raw, str) and ENV_REF in raw:
                    try:
                        child._set_value(raw.replace("${", "\\${"))
                    except OmegaConfBaseException:      # a typed non-string value: resolved at compose time
                        pass
            elif child is not None and not child._is_interpolation() and not child._is_missing() \
                    and not child._is_none():
                walk(child, False)

    walk(cfg, True)


def resolve_env_refs(text: str) -> str:
    """`text` with its environment references resolved (in the run's process); as it is when it holds none,
    or when OmegaConf cannot resolve it (a missing variable is OmegaConf's error, raised)."""
    if ENV_REF not in text:
        return text
    from omegaconf import OmegaConf  # deferred: omegaconf (0.1 s), only for a word that needs it

    value = str(OmegaConf.create({"v": text}).v)
    _WRITTEN[value] = text
    return value


def as_written(words: list[str]) -> list[str]:
    """The words with every one resolve_env_refs made put back as written (a record never holds the value)."""
    return [_WRITTEN.get(w, w) for w in words]

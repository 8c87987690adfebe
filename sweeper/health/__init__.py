"""Health checks that catch what the loss hides, on any PyTorch model.

Run the example below with `python -m sweeper.health` (tests/test_health_docs.py runs it too, so it cannot rot);
`python -m sweeper.health RUN_DIR...` prints the health table of finished runs.

>>> import torch
>>> from torch import nn
>>> import torch.nn.functional as F
>>> from sweeper.health import preflight, LiveMonitor
>>> class TinyLM(nn.Module):                      # your model: tokens (B, T) -> logits (B, T, V)
...     def __init__(self, vocab=32, dim=32, context=16):
...         super().__init__()
...         self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
...         self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
...         self.head = nn.Linear(dim, vocab)
...     def forward(self, idx):
...         T = idx.shape[1]
...         x = self.tok(idx) + self.pos(torch.arange(T))
...         mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)   # True = may not attend
...         x = x + self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]
...         return self.head(x)
>>> torch.manual_seed(0)  # doctest: +ELLIPSIS
<torch._C.Generator object at ...>
>>> model = TinyLM()
>>> tokens = torch.randint(0, 32, (8, 17))
>>> batch = (tokens[:, :-1], tokens[:, 1:])      # targets shifted by one
>>> def loss_fn(logits, targets):
...     return F.cross_entropy(logits.flatten(0, 1), targets.flatten())
>>> report = preflight(model, loss_fn, batch, num_classes=32, sequence_dim=1,
...                    optimizer_factory=lambda params: torch.optim.AdamW(params, lr=1e-2))
>>> report.ok, report.verdict
(True, 'pass')
>>> print(report)                                 # doctest: +ELLIPSIS
check               status  value     expected
---...
init_loss           PASS    ...
gradient_flow       PASS    0         0 dead parameters
    all 8 trainable parameters get a finite, nonzero gradient
...
verdict: PASS
>>> report["causality"].status
'pass'
>>> health_json = report.to_json()                # {"verdict": ..., "checks": [...]}

In training, a LiveMonitor watches every step cheaply and does the expensive part every `interval` steps:

>>> optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
>>> monitor = LiveMonitor(model, interval=10, num_classes=32)
>>> for step in range(30):
...     optimizer.zero_grad()
...     loss = loss_fn(model(batch[0]), batch[1])
...     loss.backward()
...     metrics = monitor.after_backward(step, loss)     # dict of health metrics on interval steps, else {}
...     optimizer.step()
...     metrics.update(monitor.after_step(step))         # update/weight ratios on interval steps
...     if monitor.diverged:                             # NaN/inf loss or gradient: stop, status "diverged"
...         break
>>> monitor.diverged, monitor.report().verdict
(None, 'pass')

More data, more checks: `preflight(..., loader=train_loader, val_data=val_loader, evaluate=evaluate)` also looks at
what goes into the model (inputs standardized, labels against num_classes and wrapped by a narrow integer dtype,
targets that reach the loss, class weights against the label frequencies, a label leaked into the features, labels
shuffled apart from their inputs, class-sorted batches, a debug subset or limit left on) and at the evaluation
(what evaluate really feeds the model against the training data, dropout or BatchNorm in train mode while
evaluating, BatchNorm running statistics); see docs/health-checks.md's table of the checklist.

Public names (imported lazily so `import sweeper` stays free of torch):
  preflight, CHECKS, LiveMonitor, HealthReport, CheckResult, Thresholds, diagnose, read_diagnosis (a run's one
  named diagnosis by the debugging checklist's tree; pure Python: read_diagnosis(run_dir) needs no torch).
The built-in trainer's preflight of a run config lives with the trainer (train.preflight.preflight_config);
nothing here imports train.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "HealthReport": "result", "CheckResult": "result", "STATUSES": "result",
    "Thresholds": "thresholds", "DEFAULT_THRESHOLDS": "thresholds",
    "preflight": "runner", "CHECKS": "runner",
    "LiveMonitor": "live.monitor",
    "diagnose": "diagnosis", "read_diagnosis": "diagnosis",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sweeper.health' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

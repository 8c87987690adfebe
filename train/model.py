"""A small decoder-only transformer: pre-norm blocks, causal attention, RoPE through `kernels`.

    model = Transformer(ModelConfig(), vocab_size=99)
    logits, loss = model(x, y)        # x, y: (B, T) int64 token ids

q, k and v are separate projections (`blocks.N.attn.q_proj.weight` ...) so that health checks can name the
parameter at fault when, for example, the RoPE backward stops sending gradient to Wq and Wk.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from sweeper.kernels import apply_rope, rope_cache
from sweeper.train.config import ModelConfig


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.d_model // cfg.n_heads
        self.q_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.out_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.use_rope, self.rope_impl = cfg.pos_encoding == "rope", cfg.rope_impl
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None) -> torch.Tensor:
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim)  # (B, T, H, D)
        k = self.k_proj(x).view(B, T, self.n_heads, self.head_dim)  # (B, T, H, D)
        v = self.v_proj(x).view(B, T, self.n_heads, self.head_dim)  # (B, T, H, D)
        if self.use_rope:
            q, k = apply_rope(q, k, cos, sin, layout="half", format="bthd", impl=self.rope_impl)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))            # (B, H, T, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)  # (B, H, T, D)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model)
        self.proj = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(cfg.d_model), CausalSelfAttention(cfg)
        self.ln2, self.mlp = nn.LayerNorm(cfg.d_model), MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.ln1(x), cos, sin)
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg, self.vocab_size = cfg, vocab_size
        self.tok_emb = nn.Embedding(vocab_size, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        if cfg.pos_encoding == "rope":
            cos, sin = rope_cache(cfg.context, cfg.d_model // cfg.n_heads, base=cfg.rope_base)  # (T, D/2) each
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        else:
            self.rope_cos = self.rope_sin = None
        self.apply(self._init_weights)
        for name, p in self.named_parameters():   # GPT-2: scale residual projections by depth
            if name.endswith(("out_proj.weight", "mlp.proj.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None):
        B, T = x.shape
        if T > self.cfg.context:
            raise ValueError(f"sequence length {T} exceeds model.context={self.cfg.context}")
        cos = self.rope_cos[:T] if self.rope_cos is not None else None   # (T, D/2)
        sin = self.rope_sin[:T] if self.rope_sin is not None else None   # (T, D/2)
        h = self.drop(self.tok_emb(x))                                    # (B, T, C)
        for block in self.blocks:
            h = block(h, cos, sin)
        logits = self.head(self.ln_f(h))                                  # (B, T, V)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

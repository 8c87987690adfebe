"""Plain-PyTorch RoPE: the definition every other implementation is tested against.

Run it: ``from sweeper.kernels.reference import rope_cache, rope_reference``.

Rotation convention (pinned here, used by every path in this package)
---------------------------------------------------------------------
Tables: for rotary_dim R (even) and pair index i in [0, R/2)::

    inv_freq[i] = base ** (-2 i / R)
    angle[p, i] = p * inv_freq[i]              (computed in float64, stored as float32)
    cos[p, i], sin[p, i] = cos(angle[p, i]), sin(angle[p, i])

Each pair (a, b) of a head vector at position p is rotated counter-clockwise by angle[p, i]::

    a' = a cos - b sin
    b' = b cos + a sin

"half" layout (GPT-NeoX / Llama / HF ``rotate_half``): pair i is (x[i], x[i + R/2]).
"interleaved" layout (GPT-J / torchtune): pair i is (x[2i], x[2i + 1]).
Dims x[R:] (partial rotary, R < head_dim) pass through unchanged.
The backward is the transpose, i.e. the same rotation by -angle.

Positions: ``None`` -> 0..T-1; an int ``o`` -> o..o+T-1; a 1-D int tensor (B,) -> per-batch offsets
(position of token t in batch b = offsets[b] + t); a 2-D int tensor (B, T) or (1, T) -> position_ids.
"""
from __future__ import annotations

import math

import torch

LAYOUTS = ("half", "interleaved")
FORMATS = ("bthd", "bhtd")


def rope_cache(max_positions: int, rotary_dim: int, base: float = 10000.0, device=None,
               dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin tables, each (max_positions, rotary_dim // 2), angles computed in float64."""
    if not isinstance(max_positions, int) or max_positions < 1:
        raise ValueError(f"rope_cache: max_positions={max_positions!r}; expected a positive int")
    if not isinstance(rotary_dim, int) or rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"rope_cache: rotary_dim={rotary_dim!r}; expected an even int >= 2")
    if not (isinstance(base, (int, float)) and base > 1 and math.isfinite(base)):
        raise ValueError(f"rope_cache: base={base!r}; expected a finite number > 1")
    inv_freq = base ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)  # (R/2,)
    angle = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (P, R/2)
    return angle.cos().to(dtype=dtype, device=device), angle.sin().to(dtype=dtype, device=device)


def check_positions_arg(positions, batch: int, seqlen: int) -> None:
    """Type and shape of a positions argument (module docstring); TypeError/ValueError name what is accepted."""
    if positions is None or (isinstance(positions, int) and not isinstance(positions, bool)):
        return
    if not isinstance(positions, torch.Tensor) or positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise TypeError(f"apply_rope: positions={type(positions).__name__}; expected None, an int, "
                        "or an integer tensor of shape (B,), (B, T) or (1, T)")
    shape = tuple(positions.shape)
    if len(shape) == 0 or shape == (batch,) or (len(shape) == 2 and shape[1] == seqlen and shape[0] in (1, batch)):
        return
    raise ValueError(f"apply_rope: positions shape {shape}; expected (B,)=({batch},) per-batch "
                     f"offsets or (B, T)=({batch}, {seqlen}) / (1, {seqlen}) position ids")


def resolve_positions(positions, batch: int, seqlen: int, device) -> torch.Tensor:
    """Positions argument -> int64 tensor (B, T) of absolute positions (the slow, explicit form)."""
    check_positions_arg(positions, batch, seqlen)
    t = torch.arange(seqlen, device=device, dtype=torch.int64)
    if positions is None:
        return t.expand(batch, seqlen)
    if isinstance(positions, int):
        return (t + positions).expand(batch, seqlen)
    p = positions.to(device=device, dtype=torch.int64)
    if p.dim() == 0:
        return (t + p).expand(batch, seqlen)
    if p.dim() == 1:
        return p[:, None] + t[None, :]
    return p.expand(batch, seqlen)


def check_positions_fit(pos_min: int, pos_max: int, table_len: int) -> None:
    """Raise ValueError when a position falls outside the cos/sin table."""
    if pos_min < 0:
        raise ValueError(f"apply_rope: negative position {pos_min}; positions must be >= 0")
    if pos_max >= table_len:
        raise ValueError(f"apply_rope: max position {pos_max} is past the cos/sin table of length {table_len}; "
                         f"build it with rope_cache(max_positions >= {pos_max + 1}, ...)")


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """x (B, T, H, D) in the math dtype; cos/sin (B, T, 1, R/2). Returns the rotated (B, T, H, D)."""
    rot = 2 * cos.shape[-1]
    xr, xp = x[..., :rot], x[..., rot:]
    if interleaved:
        a, b = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    else:
        a, b = xr[..., : rot // 2], xr[..., rot // 2:]
        out = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
    return torch.cat((out, xp), dim=-1)


def rope_reference(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions=None,
                   layout: str = "half", format: str = "bthd") -> tuple[torch.Tensor, torch.Tensor]:
    """The definition, differentiable by autograd. Math in float32 (float64 for float64 inputs)."""
    if layout not in LAYOUTS:
        raise ValueError(f"apply_rope: layout={layout!r}; expected one of {LAYOUTS}")
    if format not in FORMATS:
        raise ValueError(f"apply_rope: format={format!r}; expected one of {FORMATS}")
    if format == "bhtd":
        q_out, k_out = rope_reference(q.transpose(1, 2), k.transpose(1, 2), cos, sin, positions, layout, "bthd")
        return q_out.transpose(1, 2), k_out.transpose(1, 2)
    batch, seqlen = q.shape[0], q.shape[1]
    pos = resolve_positions(positions, batch, seqlen, q.device)  # (B, T)
    check_positions_fit(int(pos.min()), int(pos.max()), cos.shape[0])
    math_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    c = cos.to(math_dtype)[pos][:, :, None, :]  # (B, T, 1, R/2)
    s = sin.to(math_dtype)[pos][:, :, None, :]
    interleaved = layout == "interleaved"
    q_out = _rotate(q.to(math_dtype), c, s, interleaved).to(q.dtype)
    k_out = _rotate(k.to(math_dtype), c, s, interleaved).to(k.dtype)
    return q_out, k_out

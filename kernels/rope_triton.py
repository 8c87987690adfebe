"""Triton RoPE kernel: q and k rotated in ONE launch, forward and backward (conjugate) from the same code.

Run it: ``apply_rope(q, k, cos, sin, impl="triton")`` (CUDA, or CPU tensors under ``TRITON_INTERPRET=1``).
The low-level entry is ``launch_rope(...)``, which writes into caller-given outputs (used by the tests with
NaN-guarded buffers). Convention: kernels/reference.py (a' = a cos - b sin, b' = b cos + a sin; the backward
rotates by -angle, ``conjugate=True``).

Grid: axis 0 = blocks of BLOCK_T tokens (token = b * T + t), axis 1 = blocks of BLOCK_H heads, first over q's
heads then over k's. Each program loads its cos/sin rows once and rotates a (BLOCK_T, BLOCK_H, D) tile.
All tensors are addressed through explicit (b, t, h, d) strides with int64 offsets, so transposed (B, H, T, D)
views, slices of a packed qkv and stride-0 gradients are read in place, without a copy pass. Math is float32
(float64 for float64 inputs); cos/sin are read in their own dtype (a float64 table keeps float64 math for float64
inputs). Masks cover padded lanes of non-power-of-two dims, and rows outside the table are never read. No atomics:
deterministic, and bitwise identical for every tile configuration (each element's arithmetic is the same).

Memory access: both layouts move contiguous runs of the head dim. Half layout: two runs of R/2 (a and b halves);
interleaved: ONE run of R, split into (a, b) pairs in registers (``tl.split``) and joined back before the store, so
no stride-2 loads or stores. On CUDA the launch config comes from ``triton.autotune`` (a short config list keyed
on head dim and head counts); under the interpreter, or with an explicit ``config``, the untuned kernel runs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

POS_OFFSET, POS_BATCH_OFFSETS, POS_IDS = 0, 1, 2


@triton.jit
def _rotate_heads(X, XO, sxb, sxt, sxh, sxd, sob, sot, soh, sod, b, t, tmask, h0, n_heads, c, s,
                  ROT_HALF: tl.constexpr, HALF_PAD: tl.constexpr, PASS: tl.constexpr, PASS_PAD: tl.constexpr,
                  INTERLEAVED: tl.constexpr, MATH_F64: tl.constexpr, BLOCK_T: tl.constexpr,
                  BLOCK_H: tl.constexpr):
    """Rotate heads [h0, h0 + BLOCK_H) of BLOCK_T tokens; c, s are (BLOCK_T, HALF_PAD) in the math dtype."""
    h = h0 + tl.arange(0, BLOCK_H).to(tl.int64)                     # (BH,)
    row_x = (b * sxb + t * sxt)[:, None] + (h * sxh)[None, :]       # (BT, BH)
    row_o = (b * sob + t * sot)[:, None] + (h * soh)[None, :]
    rmask = tmask[:, None] & (h < n_heads)[None, :]                 # (BT, BH)
    c3, s3 = c[:, None, :], s[:, None, :]                           # (BT, 1, HP)
    out_ty = XO.dtype.element_ty
    if INTERLEAVED:  # one contiguous run of 2 * HP dims, pairs split in registers
        d = tl.arange(0, 2 * HALF_PAD).to(tl.int64)                 # (2HP,)
        mask = rmask[:, :, None] & (d < 2 * ROT_HALF)[None, None, :]  # (BT, BH, 2HP)
        x = tl.load(X + row_x[:, :, None] + (d * sxd)[None, None, :], mask=mask, other=0.0)
        if MATH_F64:
            x = x.to(tl.float64)
        else:
            x = x.to(tl.float32)
        xa, xb = tl.split(tl.reshape(x, (BLOCK_T, BLOCK_H, HALF_PAD, 2)))  # (BT, BH, HP) each
        oa = xa * c3 - xb * s3
        ob = xb * c3 + xa * s3
        o = tl.reshape(tl.join(oa, ob), (BLOCK_T, BLOCK_H, 2 * HALF_PAD))  # (BT, BH, 2HP)
        tl.store(XO + row_o[:, :, None] + (d * sod)[None, None, :], o.to(out_ty), mask=mask)
    else:            # two contiguous runs: dims [0, R/2) and [R/2, R)
        i = tl.arange(0, HALF_PAD).to(tl.int64)                     # (HP,)
        da, db = i, i + ROT_HALF
        mask = rmask[:, :, None] & (i < ROT_HALF)[None, None, :]    # (BT, BH, HP)
        xa = tl.load(X + row_x[:, :, None] + (da * sxd)[None, None, :], mask=mask, other=0.0)
        xb = tl.load(X + row_x[:, :, None] + (db * sxd)[None, None, :], mask=mask, other=0.0)
        if MATH_F64:
            xa, xb = xa.to(tl.float64), xb.to(tl.float64)
        else:
            xa, xb = xa.to(tl.float32), xb.to(tl.float32)
        oa = xa * c3 - xb * s3
        ob = xb * c3 + xa * s3
        tl.store(XO + row_o[:, :, None] + (da * sod)[None, None, :], oa.to(out_ty), mask=mask)
        tl.store(XO + row_o[:, :, None] + (db * sod)[None, None, :], ob.to(out_ty), mask=mask)
    if PASS > 0:  # partial rotary: dims [2 * ROT_HALF, D) are copied bit-exactly
        p = 2 * ROT_HALF + tl.arange(0, PASS_PAD).to(tl.int64)
        pmask = rmask[:, :, None] & (p < 2 * ROT_HALF + PASS)[None, None, :]
        xp = tl.load(X + row_x[:, :, None] + (p * sxd)[None, None, :], mask=pmask, other=0.0)
        tl.store(XO + row_o[:, :, None] + (p * sod)[None, None, :], xp, mask=pmask)


@triton.jit
def _rope_kernel(Q, K, QO, KO, COS, SIN, BOFF, PIDS,
                 n_tokens, seqlen, n_q_heads, n_k_heads, offset, n_rows, s_cos, s_pb, s_pt,
                 sqb, sqt, sqh, sqd, skb, skt, skh, skd,
                 sqob, sqot, sqoh, sqod, skob, skot, skoh, skod,
                 ROT_HALF: tl.constexpr, HALF_PAD: tl.constexpr, PASS: tl.constexpr, PASS_PAD: tl.constexpr,
                 POS_MODE: tl.constexpr, INTERLEAVED: tl.constexpr, CONJUGATE: tl.constexpr,
                 MATH_F64: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr):
    pid_t = tl.program_id(0).to(tl.int64)
    pid_h = tl.program_id(1)
    tok = pid_t * BLOCK_T + tl.arange(0, BLOCK_T).to(tl.int64)     # (BT,) flat token index b * T + t
    tmask = tok < n_tokens
    b = tok // seqlen
    t = tok % seqlen
    if POS_MODE == 0:
        pos = t + offset
    elif POS_MODE == 1:
        pos = t + tl.load(BOFF + b, mask=tmask, other=0)
    else:
        pos = tl.load(PIDS + b * s_pb + t * s_pt, mask=tmask, other=0)
    pos = pos.to(tl.int64)
    i = tl.arange(0, HALF_PAD)
    # rows outside the table are never read (kernels/op.py raises on them before or asynchronously with the launch)
    cmask = (tmask & (pos >= 0) & (pos < n_rows))[:, None] & (i < ROT_HALF)[None, :]
    cs_off = pos[:, None] * s_cos + i[None, :]                      # (BT, HP)
    c = tl.load(COS + cs_off, mask=cmask, other=0.0)                # the table's own dtype
    s = tl.load(SIN + cs_off, mask=cmask, other=0.0)
    if MATH_F64:
        c, s = c.to(tl.float64), s.to(tl.float64)
    else:
        c, s = c.to(tl.float32), s.to(tl.float32)
    if CONJUGATE:
        s = -s
    n_q_blocks = tl.cdiv(n_q_heads, BLOCK_H)
    if pid_h < n_q_blocks:
        _rotate_heads(Q, QO, sqb, sqt, sqh, sqd, sqob, sqot, sqoh, sqod, b, t, tmask,
                      pid_h.to(tl.int64) * BLOCK_H, n_q_heads, c, s,
                      ROT_HALF, HALF_PAD, PASS, PASS_PAD, INTERLEAVED, MATH_F64, BLOCK_T, BLOCK_H)
    else:
        _rotate_heads(K, KO, skb, skt, skh, skd, skob, skot, skoh, skod, b, t, tmask,
                      (pid_h - n_q_blocks).to(tl.int64) * BLOCK_H, n_k_heads, c, s,
                      ROT_HALF, HALF_PAD, PASS, PASS_PAD, INTERLEAVED, MATH_F64, BLOCK_T, BLOCK_H)


# (BLOCK_T, BLOCK_H, num_warps): 16-64 (token, head) rows per program, few (each one is compiled per mode);
# the autotuner picks one per (head dim, head counts, dtypes). Every config gives the same bits
# (elementwise math, no reductions).
AUTOTUNE_TILES = ((2, 8, 4), (4, 8, 4), (8, 4, 4), (16, 2, 4), (4, 8, 8), (8, 8, 8))
_rope_kernel_tuned = triton.autotune(
    configs=[triton.Config({"BLOCK_T": bt, "BLOCK_H": bh}, num_warps=w) for bt, bh, w in AUTOTUNE_TILES],
    key=["n_q_heads", "n_k_heads", "ROT_HALF", "PASS"],
)(_rope_kernel)


@dataclass(frozen=True)
class LaunchConfig:
    block_t: int
    block_h: int
    num_warps: int = 4


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def choose_config(n_tokens: int, n_q_heads: int, n_k_heads: int, head_dim: int) -> LaunchConfig:
    """Tile heuristic (a fixed config, no tuning). GPU: ~4096 elements per program. Interpreter: as few (large)
    programs as possible."""
    head_pad = triton.next_power_of_2(head_dim)
    if interpreting():  # every program instance costs ~1 ms in the interpreter
        block_h = triton.next_power_of_2(max(n_q_heads, n_k_heads))
        block_t = min(triton.next_power_of_2(n_tokens), max(1, (1 << 16) // (block_h * head_pad)))
        return LaunchConfig(block_t, block_h, 1)
    cap = max(1, 4096 // head_pad)
    block_h = min(triton.next_power_of_2(max(n_q_heads, n_k_heads)),
                  max(triton.next_power_of_2(min(n_q_heads, n_k_heads)), 4), cap)
    block_t = max(1, min(16, 4096 // (block_h * head_pad)))
    return LaunchConfig(block_t, block_h, 4)


def _strides(x: torch.Tensor) -> tuple[int, int, int, int]:
    return tuple(int(v) for v in x.stride())  # (b, t, h, d) of a logical (B, T, H, D) view


def launch_rope(q, k, cos, sin, q_out, k_out, offset: int = 0, batch_offsets=None, position_ids=None,
                interleaved: bool = False, conjugate: bool = False, config: LaunchConfig | None = None,
                autotune: bool | None = None) -> None:
    """Write R(+-angle) q into q_out and R(+-angle) k into k_out. All four are logical (B, T, H, D) views.

    Positions are checked by kernels/op.py (rows outside the table are never read here). cos/sin: (P, R/2),
    any float dtype, read as they are (row stride given; the last dim must be dense, as rope_cache makes it).
    config: a fixed tile (tests, the tile sweep); autotune: None = on CUDA unless config is given. The launch
    goes through ``torch.library.wrap_triton`` on CUDA, so it traces inside the ``triton_op``
    (kernels/rope_triton_op.py) and Inductor sees the kernel.
    """
    batch, seqlen, n_q_heads, head_dim = q.shape
    n_k_heads = k.shape[2]
    rot_half = cos.shape[1]
    n_pass = head_dim - 2 * rot_half
    if cos.stride(1) != 1 or sin.stride() != cos.stride():
        cos, sin = cos.contiguous(), sin.contiguous()   # no-ops for rope_cache tables (or row slices of them)
    n_tokens = batch * seqlen
    if n_tokens == 0 or n_q_heads + n_k_heads == 0:
        return
    if position_ids is not None:
        pos_mode, s_pb, s_pt = POS_IDS, int(position_ids.stride(0)), int(position_ids.stride(1))
        if position_ids.shape[0] == 1:
            s_pb = 0
    elif batch_offsets is not None:
        pos_mode, s_pb, s_pt = POS_BATCH_OFFSETS, 0, 0
    else:
        pos_mode, s_pb, s_pt = POS_OFFSET, 0, 0
    dummy = cos  # unused pointer arguments in the modes that do not read them
    args = (q, k, q_out, k_out, cos, sin,
            batch_offsets if batch_offsets is not None else dummy,
            position_ids if position_ids is not None else dummy,
            n_tokens, seqlen, n_q_heads, n_k_heads, int(offset), int(cos.shape[0]), int(cos.stride(0)), s_pb, s_pt,
            *_strides(q), *_strides(k), *_strides(q_out), *_strides(k_out))
    meta = dict(ROT_HALF=rot_half, HALF_PAD=triton.next_power_of_2(rot_half),
                PASS=n_pass, PASS_PAD=triton.next_power_of_2(max(n_pass, 1)),
                POS_MODE=pos_mode, INTERLEAVED=interleaved, CONJUGATE=conjugate, MATH_F64=q.dtype == torch.float64)
    if autotune is None:
        autotune = config is None and not interpreting()
    if autotune:  # the autotuner supplies BLOCK_T, BLOCK_H and num_warps
        def grid(m):
            return (triton.cdiv(n_tokens, m["BLOCK_T"]),
                    triton.cdiv(n_q_heads, m["BLOCK_H"]) + triton.cdiv(n_k_heads, m["BLOCK_H"]))
        _wrap(_rope_kernel_tuned)[grid](*args, **meta)
        return
    cfg = config or choose_config(n_tokens, n_q_heads, n_k_heads, head_dim)
    grid = (triton.cdiv(n_tokens, cfg.block_t),
            triton.cdiv(n_q_heads, cfg.block_h) + triton.cdiv(n_k_heads, cfg.block_h))
    _wrap(_rope_kernel)[grid](*args, **meta, BLOCK_T=cfg.block_t, BLOCK_H=cfg.block_h, num_warps=cfg.num_warps)


def _wrap(kernel):
    """The kernel as torch.compile can trace it (CUDA); the interpreter's kernels run as they are."""
    return kernel if interpreting() else torch.library.wrap_triton(kernel)

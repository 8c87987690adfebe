"""Readable text on a matplotlib figure: wrap long labels, and find (then fix) text that overlaps other text.

    title = wrap("final val_loss per seed; black: mean, 95% bootstrap CI", 60)
    settle(fig)                      # rotate or shrink colliding tick labels, wrap colliding titles
    overlapping_text(fig)            # [] when no two pieces of text overlap: [("x tick 'a'", "x tick 'b'"), ...]

Every plot of sweeper/report/plots.py goes through settle() before it is saved; the tests check
overlapping_text() on figures drawn with long variant names (tests/test_plots.py).
"""
from __future__ import annotations

import textwrap


def wrap(text: str, width: int) -> str:
    """Each line of `text` wrapped at `width` characters; a word longer than that (a variant name without
    spaces, `model.rope_impl=fault_no_qk_grad`) is broken after '=', '.', '_', '-' or ',' where it can be."""
    out = []
    for line in str(text).split("\n"):
        words = []
        for word in line.split(" "):
            while len(word) > width:
                cut = max((word.rfind(c, 0, width) for c in "=._-,/"), default=-1)
                cut = cut + 1 if cut > width // 3 else width
                words.append(word[:cut])
                word = word[cut:]
            words.append(word)
        out.append(textwrap.fill(" ".join(w for w in words if w), width=width, break_long_words=True,
                                 break_on_hyphens=False) or "")
    return "\n".join(out)


def _texts(fig) -> list[tuple[str, object]]:
    """(name, artist) of every visible, non-empty piece of text: titles, axis labels, tick labels, legends,
    colorbar labels, free text."""
    out = []
    if fig._suptitle is not None:
        out.append(("suptitle", fig._suptitle))
    for n, ax in enumerate(fig.axes):
        for where, title in (("title", ax.title), ("left title", ax._left_title), ("right title", ax._right_title)):
            out.append((f"axes {n} {where}", title))
        out.append((f"axes {n} x label", ax.xaxis.label))
        out.append((f"axes {n} y label", ax.yaxis.label))
        for axis_name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            low, high = sorted(axis.get_view_interval())
            span = (high - low) * 1e-9
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - span <= tick.get_loc() <= high + span:
                    continue                  # a tick outside the axes' limits is not drawn
                for label in (tick.label1, tick.label2):
                    out.append((f"axes {n} {axis_name} tick {label.get_text()!r}", label))
        for text in ax.texts:
            out.append((f"axes {n} text {text.get_text()[:30]!r}", text))
        legend = ax.get_legend()
        if legend is not None:
            out.append((f"axes {n} legend", legend))
    return [(name, a) for name, a in out if a.get_visible() and (not hasattr(a, "get_text") or a.get_text().strip())]


def _boxes(fig):
    fig.canvas.draw()                 # lays the text out (tick labels exist only once drawn)
    renderer = fig.canvas.get_renderer()
    return [(name, artist, artist.get_window_extent(renderer)) for name, artist in _texts(fig)]


def overlapping_text(fig, pad: float = 1.0) -> list[tuple[str, str]]:
    """Every pair of text pieces whose boxes overlap by more than `pad` pixels each way (a legend and the text
    inside it count as one piece)."""
    boxes = [(n, b) for n, _, b in _boxes(fig) if b.width > 0 and b.height > 0]
    out = []
    for i, (name_a, a) in enumerate(boxes):
        for name_b, b in boxes[i + 1:]:
            if min(a.x1, b.x1) - max(a.x0, b.x0) > pad and min(a.y1, b.y1) - max(a.y0, b.y0) > pad:
                out.append((name_a, name_b))
    return out


def settle(fig) -> list[tuple[str, str]]:
    """Fix what overlaps, in steps, until nothing does: x tick labels turned upright, then smaller; titles
    wrapped narrower. Returns what still overlaps ([] on every plot sweeper draws)."""
    for step in range(6):
        clashes = overlapping_text(fig)
        if not clashes:
            return []
        names = {n for pair in clashes for n in pair}
        for ax_n, ax in enumerate(fig.axes):
            prefix = f"axes {ax_n} "
            if any(n.startswith(prefix + "x tick") for n in names):
                labels = ax.get_xticklabels()
                if step == 0:                # upright: each label as wide as its lines are tall
                    for label in labels:
                        label.set_rotation(90)
                else:
                    for label in labels:
                        label.set_fontsize(max(5.0, label.get_fontsize() * 0.85))
            for where, title in (("title", ax.title),):
                if prefix + where in names:
                    title.set_text(wrap(title.get_text().replace("\n", " "), max(20, 60 - 10 * step)))
        if "suptitle" in names and fig._suptitle is not None:
            fig._suptitle.set_text(wrap(fig._suptitle.get_text().replace("\n", " "), max(20, 60 - 10 * step)))
    return overlapping_text(fig)

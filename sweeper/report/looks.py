"""The looks of an adaptive sweep in its report: per comparison, each look's seeds, statistic, boundary, alpha
spent, local level and decision, where and why it stopped, and the runs saved against the fixed design.

    md, terminal = looks_lines(sweep_dir)      # ([], []) for a sweep that was not adaptive
    text = add_looks(sweep_dir, text)          # report_sweep: report.md/html get the section, text the lines
"""
from __future__ import annotations

from pathlib import Path

from sweeper.plan.looks import looks_path, read_looks
from sweeper.report.html import write_html
from sweeper.run.files.atomic import atomic_write_text
from sweeper.run.files.reading import UnreadableFile

SECTION = "## Adaptive looks"


def _fmt(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def looks_lines(sweep_dir: str | Path) -> tuple[list[str], list[str]]:
    """(markdown lines, terminal lines) of the looks record; a damaged record is one line in both."""
    try:
        rec = read_looks(sweep_dir)
        return _lines(rec) if rec is not None else ([], [])
    except UnreadableFile as e:
        warning = f"WARNING: {e}"
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError) as e:
        warning = (f"WARNING: {looks_path(sweep_dir)}: not a looks record this sweeper can read ({type(e).__name__}: "
                   f"{e}); delete it to restart the adaptive looks (finished runs are kept)").splitlines()[0]
    return [SECTION, "", warning, ""], [warning]


def _lines(rec: dict) -> tuple[list[str], list[str]]:
    d, base = rec["design"], rec.get("baseline", "baseline")
    last = rec["looks"][-1]["seeds"] if rec["looks"] else {}
    runs = sum(last.values())
    fixed = rec.get("fixed_runs", (len(last) or 1) * d["max_seeds"])
    saved = f"{fixed - runs} of {fixed} runs saved ({(fixed - runs) / fixed:.0%}) against the fixed design at " \
            f"max_seeds={d['max_seeds']}" if fixed else ""
    md = [SECTION, "",
          f"seeds=adaptive: looks at {d['start']}, +{d['batch']} per look, up to {d['max_seeds']} seeds per arm; "
          f"alpha {d['alpha']} over all looks and comparisons ({d['spending']} spending per comparison, graphical "
          f"Holm: a decided comparison passes its level on); futility at min_effect {d['min_effect']:.4g}. "
          f"{runs} runs; {saved}. These decisions, not the fixed-n table above, are the sweep's verdicts.", ""]
    term = [f"adaptive looks ({len(rec['looks'])}): {runs} runs, {saved}"]
    for v, s in rec["states"].items():
        md += [f"### {v} vs {base}: {s['status']}", "", s["reason"] or "still open", "",
               "| look | seeds | test | statistic (difference) | p | boundary z | nominal p | local alpha | "
               "alpha spent | decision |", "|---|---|---|---|---|---|---|---|---|---|"]
        for k, look in enumerate(s["looks"], 1):
            st = look["stat"]
            md.append(f"| {k} | {look['n']} | {st['test']} | {_fmt(st['estimate'], 4)} | {_fmt(st['pvalue'])} | "
                      f"{_fmt(look.get('boundary_z'))} | {_fmt(look.get('nominal_p'))} | "
                      f"{_fmt(look.get('alpha_i_after', look['alpha_i']))} | {_fmt(look.get('spent'))} | "
                      f"{look.get('decision', '-')} |")
        md.append("")
        where = f"at look {len(s['looks'])}, {s['looks'][-1]['n']} seeds" if s["looks"] else "before any look"
        term.append(f"  {v} vs {base}: {s['status'].upper()} {where}: {s['reason']}")
    return md, term


def add_looks(sweep_dir: str | Path, text: str) -> str:
    """Insert the looks section into report.md (before "## What each variant changes"), rewrite report.html,
    and return the terminal text with the looks lines; a sweep without looks is left as it is."""
    md, term = looks_lines(sweep_dir)
    if not md:
        return text
    path = Path(sweep_dir) / "report.md"
    report = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    marker = "## What each variant changes"
    block = "\n".join(md) + "\n"
    report = report.replace(marker, block + marker, 1) if marker in report else report + "\n" + block
    atomic_write_text(path, report)
    write_html(report, Path(sweep_dir))
    return text + "\n" + "\n".join(term)

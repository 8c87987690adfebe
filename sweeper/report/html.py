"""report.html: the sweep's report.md as ONE self-contained web page (tables, and every plot inline).

    from sweeper.report.html import write_html
    write_html(markdown_text, out_dir)     # out_dir/report.html; what sweeper.report.write_report calls

The page is rendered from the same markdown as report.md (one source for both): headings, paragraphs, lists,
pipe tables, **bold**, `code` and images. Every image that report.md links (plots/*.png) is embedded as a
data: URI, so the file can be mailed or opened anywhere; the page loads nothing else (no scripts, fonts, CDN).
An image that cannot be read is named in the page instead of silently missing. Reads files only, no torch.
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from sweeper.run.files.atomic import atomic_write_text

STYLE = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.3em .6em;
text-align:left;vertical-align:top}th{background:#f3f3f3}tr:nth-child(even) td{background:#fafafa}
img{max-width:100%;display:block;margin:1em 0}code{background:#f3f3f3;padding:0 .2em}"""
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


def _inline(text: str, out_dir: Path) -> str:
    """Escape one line of markdown text and render images, **bold** and `code`."""
    parts, last = [], 0
    for m in IMAGE.finditer(text):
        parts.append(_emphasis(html.escape(text[last:m.start()])))
        parts.append(_image(m.group(1), m.group(2), out_dir))
        last = m.end()
    parts.append(_emphasis(html.escape(text[last:])))
    return "".join(parts)


def _emphasis(escaped: str) -> str:
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _image(alt: str, src: str, out_dir: Path) -> str:
    path = (out_dir / src).resolve()
    mime = MIME.get(path.suffix.lower())
    try:
        if mime is None or not path.is_relative_to(out_dir.resolve()):
            raise OSError("not an image of this report")
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError as e:
        return f"<p><em>plot {html.escape(src)} could not be read ({html.escape(str(e))})</em></p>"
    return f'<img alt="{html.escape(alt)}" src="data:{mime};base64,{data}">'


def _cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|")) if line.strip() != "|" else []
    return [c.strip().replace("\\|", "|") for c in cells]


def _table(lines: list[str], out_dir: Path) -> str:
    header, body = _cells(lines[0]), [_cells(x) for x in lines[2:]]
    head = "".join(f"<th>{_inline(c, out_dir)}</th>" for c in header)
    rows = "".join("<tr>" + "".join(f"<td>{_inline(c, out_dir)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def render(markdown: str, out_dir: str | Path) -> str:
    """The whole page for a report's markdown (images relative to out_dir)."""
    out_dir = Path(out_dir)
    lines, out, i, title = markdown.splitlines(), [], 0, "sweeper report"
    while i < len(lines):
        line = lines[i]
        if line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append(_table(lines[i:j], out_dir))
            i = j
            continue
        if line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:], out_dir)}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        m = re.match(r"(#{1,6}) (.*)", line)
        if m:
            level = len(m.group(1))
            title = m.group(2) if level == 1 and title == "sweeper report" else title
            out.append(f"<h{level}>{_inline(m.group(2), out_dir)}</h{level}>")
        elif IMAGE.fullmatch(line.strip()):
            out.append(_inline(line.strip(), out_dir))
        elif line.strip():
            out.append(f"<p>{_inline(line.rstrip(), out_dir)}</p>")
        i += 1
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(out) + "\n</body></html>\n")


def write_html(markdown: str, out_dir: str | Path) -> Path:
    """Write out_dir/report.html from the report's markdown; returns its path."""
    path = Path(out_dir) / "report.html"
    atomic_write_text(path, render(markdown, out_dir))
    return path

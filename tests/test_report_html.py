"""report.html opens in a real headless browser: title, decision table, every plot decoded, nothing fetched.

Needs Debian's chromium (/usr/bin/chromium) and Python playwright (the test extra); .ci/run installs chromium
and sets SWEEPER_REQUIRE_BROWSER=1, so there a missing browser fails instead of skipping.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sweeper.config.decision import DecisionOptions
from sweeper.report.html import render
from sweeper.report.write import report_sweep
from tests.helpers.synthetic_sweep import write_sweep

CHROMIUM = os.environ.get("SWEEPER_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _browser_problem() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "python playwright is not installed (pip install -e '.[test]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    return None


@pytest.fixture()
def browser_page():
    problem = _browser_problem()
    if problem:
        if os.environ.get("SWEEPER_REQUIRE_BROWSER"):
            pytest.fail(f"SWEEPER_REQUIRE_BROWSER is set but {problem}")
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser.new_page()
        finally:
            browser.close()


FINALS = {"base": [1.00, 1.10, 0.95, 1.05], "better": [0.70, 0.80, 0.66, 0.74], "same": [1.01, 1.08, 0.97, 1.04]}


@pytest.mark.slow
def test_report_html_opens_in_a_browser_with_its_tables_and_plots(tmp_path, browser_page):
    sweep = write_sweep(tmp_path / "sweep", FINALS, baseline="base", name="html check")
    report_sweep(sweep, DecisionOptions(), plots=True)
    page_file = Path(sweep) / "report.html"
    assert page_file.is_file()
    requests = []
    browser_page.on("request", lambda r: requests.append(r.url))
    browser_page.goto(page_file.resolve().as_uri())
    browser_page.wait_for_load_state("load")
    assert "html check" in browser_page.title()
    table = browser_page.locator("table").first
    headers = [h.strip() for h in table.locator("th").all_inner_texts()]
    assert headers[0] == "variant" and "verdict" in headers
    rows = {cells[0]: cells for cells in
            ([c.strip() for c in r.locator("td").all_inner_texts()] for r in table.locator("tbody tr").all())}
    assert set(rows) == set(FINALS)
    verdict_col = headers.index("verdict")
    assert rows["better"][verdict_col].startswith("better")
    assert rows["same"][verdict_col].startswith("inconclusive")
    images = browser_page.locator("img")
    assert images.count() >= 2
    widths = browser_page.eval_on_selector_all("img", "els => els.map(e => e.complete ? e.naturalWidth : 0)")
    assert all(w > 0 for w in widths), widths
    outside = [u for u in requests if not u.startswith(("file:", "data:"))]
    assert not outside, outside
    assert all(u.startswith("data:") for u in
               browser_page.eval_on_selector_all("img", "els => els.map(e => e.src)"))


def test_the_page_escapes_text_and_names_an_unreadable_plot(tmp_path):
    md = "# a <b>&</b> title\n\n| x | y |\n|---|---|\n| <script>1</script> | a \\| b |\n\n![gone](plots/none.png)\n"
    page = render(md, tmp_path)
    assert "<script>1" not in page and "&lt;script&gt;" in page
    assert "<td>a | b</td>" in page
    assert "plot plots/none.png could not be read" in page
    outside = render("![x](../../etc/passwd.png)\n", tmp_path)
    assert "could not be read" in outside and "base64" not in outside


LONG = {"rope": [3.0, 3.1, 3.2, 3.05], "model.rope_impl=fault_no_qk_grad": [3.5, 3.6, 3.4, 3.55],
        "nope_with_a_very_long_variant_name_indeed": [3.3, 3.2, 3.4, 3.1],
        "lr=0.001 wd=0.1 warmup=100": [2.9, 3.0, 3.1, 3.0], "short": [3.0, 3.0, 3.1, 3.2]}


@pytest.mark.slow
def test_plots_with_long_variant_names_are_readable_on_the_page(tmp_path, browser_page):
    """Every plot shows whole, side by side with nothing (no image over another or over text), at no less than
    60% of its size (its 8-pt labels stay legible), and what the browser paints of it is the plot itself (an
    element screenshot: as large as the image on the page, not blank). Text inside each PNG does not overlap:
    tests/test_plots.py checks the figures' text boxes."""
    import io

    from PIL import Image

    sweep = write_sweep(tmp_path / "sweep", LONG, baseline="rope", name="long names")
    report_sweep(sweep, DecisionOptions(), plots=True)
    browser_page.set_viewport_size({"width": 1280, "height": 900})
    browser_page.goto((Path(sweep) / "report.html").resolve().as_uri())
    browser_page.wait_for_load_state("load")
    boxes = browser_page.eval_on_selector_all(
        "img, h1, h2, h3, p, table", "els => els.map(e => { const r = e.getBoundingClientRect(); return "
        "{tag: e.tagName, alt: e.alt || '', x: r.x, y: r.y + window.scrollY, w: r.width, h: r.height, "
        "natural: e.naturalWidth || 0}; })")
    images = [b for b in boxes if b["tag"] == "IMG"]
    assert len(images) >= 3, boxes
    for img in images:
        assert img["natural"] > 0 and img["w"] >= 0.6 * img["natural"], img          # not shrunk unreadable
        assert img["x"] >= 0 and img["x"] + img["w"] <= 1280, img                    # whole, no sideways scroll
        for other in boxes:
            if other is img or other["w"] == 0 or other["h"] == 0:
                continue
            overlap_x = min(img["x"] + img["w"], other["x"] + other["w"]) - max(img["x"], other["x"])
            overlap_y = min(img["y"] + img["h"], other["y"] + other["h"]) - max(img["y"], other["y"])
            assert overlap_x <= 1 or overlap_y <= 1, (img, other)
    for n, locator in enumerate(browser_page.locator("img").all()):
        shot = Image.open(io.BytesIO(locator.screenshot())).convert("L")
        assert abs(shot.width - images[n]["w"]) <= 2, (shot.size, images[n])
        lo, hi = shot.getextrema()
        assert hi - lo > 100, images[n]["alt"]                                       # drawn, not blank

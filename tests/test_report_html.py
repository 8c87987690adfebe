"""report.html opens in a real headless browser: title, decision table, every plot decoded, nothing fetched.

Needs Debian's chromium (/usr/bin/chromium) and Python playwright (the test extra); .ci/run installs chromium
and sets SWEEPER_REQUIRE_BROWSER=1, so there a missing browser fails instead of skipping.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

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
    report_sweep(sweep, plots=True)
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

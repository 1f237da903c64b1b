"""Take the screenshots of docs/ui.md of `ragsweep ui` with Playwright and the system Chromium.

    python docs/ui/screenshots.py STORE_URL

STORE_URL: a results database holding at least one succeeded run and a test set (the
page's: runs on examples/, one with `ragsweep run`, the others started from the page).
The runs list, the comparison, a question's history, one question side by side and the
run page's charts (two configurations brushed) are taken over the tests' nightly store
instead (tests/ui_demo.py: three nights, the last one regressed; one question edited
there). The PNGs are written beside this script.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests"))

from conftest import free_port  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from ui_demo import NIGHTS, fill, serving  # noqa: E402

from ragsweep.core.errors import safe_url  # noqa: E402
from ragsweep.store import database  # noqa: E402
from ragsweep.ui import create_app  # noqa: E402


def main(url: str) -> None:
    engine = database.connect(url)
    runs = [r["run_id"] for r in database.find_runs(engine, status="succeeded")]
    if not runs:
        raise SystemExit(f"{safe_url(url)}: no succeeded run to show")
    with tempfile.TemporaryDirectory() as folder:
        nightly = database.connect(f"sqlite:///{folder}/nightly.db")
        fill(nightly, Path(folder) / "docs")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"))
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            with serving(create_app(nightly), free_port()) as base:
                shoot(page, base, "/", "runs")
                shoot_nightly(page, base)
                shoot_views(page, base)
            with serving(create_app(engine), free_port()) as base:
                shoot(page, base, f"/runs/{runs[0]}", "run", full=True)
                best = page.locator("#best-config a").get_attribute("href")
                page.goto(base + best)  # the best configuration's questions, failed first
                links = [
                    a.get_attribute("href")
                    for css in ("tr.question-row.failed a", "tr.question-row:not(.failed) a")
                    for a in page.locator(f"#questions {css}").all()
                ]
                for link in links:  # the first with a retrieved gold span, else the first
                    page.goto(base + link)
                    if page.locator("#retrieved mark").count():
                        break
                else:
                    page.goto(base + links[0])
                page.set_viewport_size({"width": 1280, "height": 1400})
                shoot(page, base, page.url.removeprefix(base), "drill-down")
                page.set_viewport_size({"width": 1280, "height": 860})
                shoot(page, base, "/testsets", "testsets")
                shoot(page, base, "/start", "start")
                shoot(page, base, f"/runs/{runs[0]}/matrix", "matrix")
            browser.close()


def shoot_nightly(page, base: str) -> None:
    """The comparison of the three nights and a question's history with one edit."""
    shoot(page, base, "/compare?" + "&".join(f"runs={n}" for n in NIGHTS), "compare")
    page.goto(f"{base}/testsets/curated.json/questions/q002")  # one edit: a history
    page.fill("#edit textarea[name=question]", "What about q002, after the upgrade?")
    page.fill("#edit input[name=topic]", "Upgrades")
    page.fill("#edit input[name=author]", "Ana")
    page.fill("#edit input[name=comment]", "the upgrade changed the wording")
    with page.expect_navigation():
        page.click("#edit button")
    shoot(page, base, "/testsets/curated.json/questions/q002", "testset-question", full=True)


def shoot_views(page, base: str) -> None:
    """One question side by side, and the run page's charts with the two best
    configurations brushed on the metric's axis of the parallel coordinates."""
    shoot(page, base, f"/runs/{NIGHTS[0]}/side-by-side?question=q002", "side-by-side", full=True)
    page.goto(f"{base}/runs/{NIGHTS[0]}")
    page.wait_for_selector("#run-charts[data-ready=true]")
    chart = page.locator("#parallel-chart")
    chart.scroll_into_view_if_needed()
    top, low = page.evaluate(
        """() => {
          const chart = echarts.getInstanceByDom(document.getElementById('parallel-chart'));
          const parallel = chart.getModel().getComponent('parallel').coordinateSystem;
          const dim = parallel.dimensions[parallel.dimensions.length - 3];
          return [parallel.dataToPoint(0.8, dim), parallel.dataToPoint(0.69, dim)];
        }"""
    )
    box = chart.bounding_box()
    page.mouse.move(box["x"] + top[0], box["y"] + top[1] - 4)
    page.mouse.down()
    page.mouse.move(box["x"] + low[0], box["y"] + low[1], steps=8)
    page.mouse.up()
    page.wait_for_selector("#leaderboard tr.chart-selected")
    page.set_viewport_size({"width": 1280, "height": 1500})
    page.locator("#run-charts").scroll_into_view_if_needed()
    page.screenshot(path=HERE / "charts.png")
    page.set_viewport_size({"width": 1280, "height": 860})
    print(f"charts.png: /runs/{NIGHTS[0]}, two configurations brushed")


def shoot(page, base: str, path: str, name: str, full: bool = False) -> None:
    page.goto(base + path)
    page.screenshot(path=HERE / f"{name}.png", full_page=full)
    print(f"{name}.png: {path}")


if __name__ == "__main__":
    main(sys.argv[1])

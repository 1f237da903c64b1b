"""Take the README's screenshots of `ragsweep ui` with Playwright and the system Chromium.

    python docs/ui/screenshots.py STORE_URL

STORE_URL: a results database holding at least two succeeded runs of a sweep and a test set
(the README's come from two `ragsweep run`s on examples/). The PNGs are written beside this
script.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests"))

from conftest import free_port  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from ui_demo import serving  # noqa: E402

from ragsweep import store  # noqa: E402
from ragsweep.ui import create_app  # noqa: E402


def main(url: str) -> None:
    engine = store.connect(url)
    runs = [r["run_id"] for r in store.find_runs(engine, status="succeeded")]
    if len(runs) < 2:
        raise SystemExit(f"{store.safe_url(url)}: needs two succeeded runs, found {len(runs)}")
    latest, before = runs[0], runs[1]
    with serving(create_app(engine), free_port()) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"))
        page = browser.new_page(viewport={"width": 1280, "height": 860})

        def shot(path: str, name: str) -> None:
            page.goto(base + path)
            page.screenshot(path=HERE / f"{name}.png")
            print(f"{name}.png: {path}")

        shot("/", "runs")
        shot(f"/runs/{latest}", "run")
        page.goto(f"{base}/runs/{latest}")
        failure = page.locator("#failures tr.failure-row a").first.get_attribute("href")
        shot(failure, "drill-down")
        shot(f"/compare?baseline={before}&candidate={latest}", "compare")
        shot("/testsets", "testsets")
        page.goto(f"{base}/testsets")
        first = page.locator("#testsets tr.testset-row a").first.get_attribute("href")
        page.goto(base + first)
        question = page.locator("#items tr.item-row a").first.get_attribute("href")
        shot(question, "testset-question")
        shot("/start", "start")
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1])

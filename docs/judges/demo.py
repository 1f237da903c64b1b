"""The labelling demo of docs/metrics.md: a judged run on examples/ (the tests' scripted
judge), 40 labels entered in Chromium on the UI's drill-down pages, the judge's agreement in
the UI and the report; then the judges compared on those labels, with a scripted judge that
agrees with the labeller. Writes labelling.png beside this script.

    python docs/judges/demo.py WORK_FOLDER
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import free_port  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from scripted_llm import ScriptedLLM, default_responder  # noqa: E402
from ui_demo import serving  # noqa: E402

from ragsweep.store import database  # noqa: E402
from ragsweep.ui import create_app  # noqa: E402

LABELS = 40


def person(answer: str) -> bool:
    """The labeller's own view of an answer (arbitrary, so the judge is near chance)."""
    return len(answer.strip()) % 2 == 0


def responder(request: dict) -> str:
    """The scripted judge, and ``agreeing``: a judge that says what the labeller says."""
    if request["model"] != "agreeing":
        return default_responder(request)
    answer = request["messages"][1]["content"].split("Assistant's answer:\n")[1]
    return json.dumps({"correctness": person(answer), "correctness_reason": "as the labeller"})


def ragsweep(*args: str, env: dict) -> str:
    done = subprocess.run(["ragsweep", *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    return done.stdout


def label_in_chromium(base: str, run_id: str) -> str:
    """Label the first LABELS answers of the queue as the labeller sees them; the agreement
    the page then shows."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"))
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(f"{base}/runs/{run_id}/label")
        page.fill("input[name=author]", "ann")
        for _ in range(LABELS):
            judge_correct = "Judge: correct" in page.locator("#verdict").inner_text()
            mine = person(page.locator("#answer").inner_text())
            with page.expect_navigation():
                page.click(f"button[value={'agree' if judge_correct == mine else 'disagree'}]")
        page.locator("#verdict").scroll_into_view_if_needed()
        page.screenshot(path=str(HERE / "labelling.png"))
        shown = page.locator("#agreement p").inner_text()
        browser.close()
    return shown


def main(work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server = ScriptedLLM().start()
    server.responder = responder
    server.models.append("agreeing")
    url = f"sqlite:///{work / 'results.db'}"
    env = dict(os.environ, RAGSWEEP_LLM_BASE_URL=server.url, RAGSWEEP_STORE_URL=url)
    env["RAGSWEEP_CACHE_DIR"] = str(work / "cache")
    try:
        ragsweep(
            "run", "--docs", str(ROOT / "examples/docs"),
            "--testset", str(ROOT / "examples/testset.jsonl"), "--llm", "answerer",
            "--judge", "judge", "--chunk-sizes", "128", "--top-k", "1,3",
            "--search-types", "similarity", "--output", str(work / "runs"), env=env,
        )  # fmt: skip
        run_id = next((work / "runs").iterdir()).name
        with serving(create_app(database.connect(url)), free_port()) as base:
            print("UI:", label_in_chromium(base, run_id))
        report = work / "runs" / run_id / "report.html"
        print(ragsweep("labels", "agreement", run_id, "--report", str(report), env=env))
        print(ragsweep("leaderboard", run_id, "--metric", "correctness_corrected", env=env))
        ragsweep("labels", "export", str(work / "labels.jsonl"), env=env)
        labelled = str(work / "labels.jsonl")
        print(ragsweep("judges", "compare", "--judges", "judge,agreeing", "--labels", labelled,
                       env=env))  # fmt: skip
    finally:
        server.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("judges-demo"))

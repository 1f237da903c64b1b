"""The HTML report: self-contained, escaped, and read by a real headless Chromium."""

import re
import shutil
import struct
import subprocess

import numpy as np
import pyarrow as pa
import pytest
from builders import make_board, make_reranked_board, rerank_latencies

from ragsweep.core.schemas import settings_of
from ragsweep.evaluation.leaderboard import Board
from ragsweep.reporting.report import best_metrics, pareto_front, render_html, render_markdown

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def board() -> Board:
    rng = np.random.default_rng(4)
    values = (rng.random((4, 40)) < np.array([[0.8], [0.75], [0.6], [0.3]])).astype(float)
    n = values.size
    b = make_board(values, latency_s=list(rng.gamma(2.0, 0.4, n)), llm_calls=[1] * n)
    failures = b.failures.to_pylist()
    failures[0]["question"] = "Is <script>alert('x')</script> & co escaped?"
    return Board(
        b.leaderboard, b.results, b.breakdown, pa.Table.from_pylist(failures, b.failures.schema)
    )


def test_report_needs_no_network_and_no_script(board):
    html = render_html(board)
    assert "<script" not in html.replace("&lt;script", "")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html
    assert html.count("<svg") >= board.leaderboard.num_rows + 1  # interval bars + scatter


def test_report_escapes_what_the_test_set_and_answers_say(board):
    html = render_html(board)
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; co" in html


def test_pareto_front_keeps_only_the_points_nothing_beats_on_both_axes():
    points = [(1.0, 0.5, 0), (2.0, 0.7, 1), (2.5, 0.6, 2), (3.0, 0.9, 3), (0.5, 0.2, 4)]
    assert pareto_front(points) == [4, 0, 1, 3]


def test_summary_and_metrics_name_the_best_configuration(board):
    best = board.leaderboard.slice(0, 1).to_pylist()[0]
    assert best["label"] in render_markdown(board)
    metrics = best_metrics(board)
    assert metrics["answer_correctness"] == best["answer_correctness"]
    assert metrics["answer_correctness_low"] <= metrics["answer_correctness"]
    assert metrics["clusters"] == settings_of(board.leaderboard)["clusters"]["count"] > 1
    assert "judge_unreadable_share" not in metrics  # not judged


def test_report_shows_failed_answers_and_flags_configurations_that_fail_often(board):
    assert 'id="errors"' not in render_html(board) and "<th>errors</th>" not in render_html(board)
    values = (np.random.default_rng(5).random((3, 20)) < 0.7).astype(float)
    error = [None] * 40 + ["HTTP 400 after 1 call(s): <too long>"] * 5 + [None] * 15
    failing = make_board(values, answer_error=error)
    html = render_html(failing)
    assert "<th>errors</th>" in html and html.count('class="error-row"') == 5
    [flagged] = re.findall(
        r'<tr class="config-row[^"]*flagged[^"]*" data-config-id="([^"]+)"', html
    )
    assert flagged == failing.results["config_id"][40].as_py()
    assert '<td class="num errors">5 !</td>' in html
    assert "HTTP 400 after 1 call(s): &lt;too long&gt;" in html
    assert "5 answers or verdicts failed" in render_markdown(failing)


def rerank_cells(html: str) -> dict[str, str]:
    """Each leaderboard row's rerank cell, by configuration id."""
    rows = re.findall(r'<tr class="config-row[^"]*" data-config-id="([0-9a-f]+)">(.*?)</tr>', html)
    found = {c: re.findall(r'<td class="num rerank">([^<]*)</td>', row) for c, row in rows}
    assert all(len(cells) == 1 for cells in found.values()), found
    return {c: cells[0] for c, cells in found.items()}


def test_report_shows_rerank_latency_when_a_configuration_reranks():
    values = (np.random.default_rng(6).random((4, 30)) < 0.6).astype(float)
    html = render_html(make_reranked_board(values))
    assert "<th>rerank ms (p50 / p95)</th>" in html
    expected = {
        config_id: f"{np.percentile(ms, 50):.3f} / {np.percentile(ms, 95):.3f} p95" if ms else "-"
        for config_id, ms in rerank_latencies(values).items()
    }
    assert sorted(expected.values()).count("-") == 2
    assert rerank_cells(html) == expected


def test_report_of_a_run_without_reranking_has_no_rerank_column(board):
    html = render_html(board)
    assert "rerank ms" not in html and 'class="num rerank"' not in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian package chromium)")
def test_report_renders_in_headless_chromium(board, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(board), encoding="utf-8")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    rows = re.findall(r'<tr class="config-row[^"]*" data-config-id="([0-9a-f]+)"', dom)
    assert rows == board.leaderboard["config_id"].to_pylist()
    assert 'id="pareto"' in dom and 'class="front"' in dom
    assert len(re.findall(r'<tr class="failure-row"', dom)) == board.failures.num_rows
    assert 'id="by-topic"' in dom and 'id="settings"' in dom

    shot = tmp_path / "report.png"
    subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1400,2000", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", header[16:24]) == (1400, 2000)


def test_the_settings_list_counts_the_documents_hashes_instead_of_listing_each():
    from ragsweep.reporting.report import settings_list

    hashes = [[f"doc{i}.md", f"{i:016x}"] for i in range(500)]
    shown = settings_list({"sweep_name": "kb-nightly", "document_hashes": hashes})
    assert "500 documents, each one&#x27;s content hash" in shown
    assert "doc1.md" not in shown and "kb-nightly" in shown


def test_the_report_holds_a_place_for_the_comparison_with_the_baseline(board):
    from ragsweep.reporting.report import comparison_section, with_comparison

    html = render_html(board)
    placed = with_comparison(html, comparison_section(None, "No earlier run of 'kb' & co."))
    assert placed.index('id="comparison"') < placed.index('<table id="leaderboard">')
    assert "No earlier run of &#x27;kb&#x27; &amp; co." in placed
    assert placed.replace(comparison_section(None, "No earlier run of 'kb' & co."), "") != html

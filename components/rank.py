from kfp import dsl
from kfp.dsl import HTML, Artifact, Dataset, Input, Markdown, Metrics, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def rank(
    settings: Input[Dataset],
    scores: Input[Dataset],
    answers: Input[Dataset],
    questions: Input[Dataset],
    documents: Input[Dataset],
    leaderboard: Output[Dataset],
    results: Output[Dataset],
    breakdown: Output[Dataset],
    failures: Output[Dataset],
    report: Output[HTML],
    summary: Output[Markdown],
    best: Output[Metrics],
    rag_patterns: Output[Artifact],
):
    """Rank every configuration by the run's ``optimization_metric`` with intervals and
    paired tests; the run's settings record the sweep key, a hash of the ``questions``' and
    ``documents``' content, each document's content hash, and ``sweep_name`` (empty: the
    sweep key), the sweep a later run's ``baseline=latest`` follows.

    Outputs: Arrow artifacts ``leaderboard`` (run settings in its metadata), ``results``
    (configuration x question), ``breakdown`` (by topic and question type) and ``failures``
    (of the best configuration); the ``report`` (HTML), a ``summary`` (Markdown) and the
    best configuration's figures as ``best`` metrics; ``rag_patterns``, a folder holding
    the run's ``patterns`` best configurations as runnable patterns
    (``ragsweep.patterns``).
    """
    from pathlib import Path

    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.evaluation.leaderboard import build_board
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.patterns import write_patterns
    from ragsweep.reporting.judge_agreement import with_stored_labels
    from ragsweep.reporting.report import best_metrics, render_html, render_markdown
    from ragsweep.store.database import reading_url
    from ragsweep.sweep.settings import read_settings
    from ragsweep.sweep.space import configs_table

    with pipeline_step():
        run = read_settings(settings.path)
        testset = read_table(questions.path, "testset")
        answered = read_table(answers.path, "answers")
        texts = read_table(documents.path, "documents")
        board = build_board(
            read_table(scores.path, "scores"),
            answered,
            testset,
            configs_table(run.all_configs()),  # the deployed assistants' rows included
            run.optimization_metric,
            settings=run.record(testset, texts),
        )
        tables = {"leaderboard": leaderboard, "results": results, "breakdown": breakdown}
        for kind, artifact in {**tables, "failures": failures}.items():
            write_table(getattr(board, kind), artifact.path, kind)
        html, url = render_html(board), reading_url()
        if url:  # people's labels of answers this run reproduced: its judge's agreement
            html = with_stored_labels(html, url, board.leaderboard, board.results)
        with open(report.path, "w", encoding="utf-8") as f:
            f.write(html)
        with open(summary.path, "w", encoding="utf-8") as f:
            f.write(render_markdown(board))
        for name, value in best_metrics(board).items():
            best.log_metric(name, value)
        written = write_patterns(
            Path(rag_patterns.path),
            board.leaderboard,
            board.results,
            answered,
            testset,
            texts,
            run.space,
            run.llm,
            run.patterns,
        )
        rag_patterns.metadata["patterns"] = [p.name for p in written]

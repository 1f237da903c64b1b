from typing import List

from kfp import dsl
from kfp.dsl import HTML, Artifact, Dataset, Input, Markdown, Metrics, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def rank(
    scores: Input[Dataset],
    answers: Input[Dataset],
    questions: Input[Dataset],
    documents: Input[Dataset],
    input_data_bucket_name: str,
    input_data_key: str,
    input_data_keys: List[str],
    test_data_bucket_name: str,
    test_data_key: str,
    search_space: dict,
    optimization_metric: str,
    max_document_bytes: int,
    max_questions: int,
    max_llm_calls: int,
    seed: int,
    llm: dict,
    qa_generation: dict,
    leaderboard: Output[Dataset],
    results: Output[Dataset],
    breakdown: Output[Dataset],
    failures: Output[Dataset],
    report: Output[HTML],
    summary: Output[Markdown],
    best: Output[Metrics],
    rag_patterns: Output[Artifact],
    patterns: int = 3,
    sweep_name: str = "",
):
    """Rank every configuration by ``optimization_metric`` with intervals and paired tests;
    the run's settings record the sweep key, a hash of the ``questions``' and ``documents``'
    content, each document's content hash, and ``sweep_name`` (empty: the sweep key), the
    sweep a later run's ``baseline=latest`` follows.

    Outputs: Arrow artifacts ``leaderboard`` (run settings in its metadata), ``results``
    (configuration x question), ``breakdown`` (by topic and question type) and ``failures``
    (of the best configuration); the ``report`` (HTML), a ``summary`` (Markdown) and the
    best configuration's figures as ``best`` metrics; ``rag_patterns``, a folder holding
    the ``patterns`` best configurations as runnable patterns (``ragsweep.results.patterns``).
    """
    from pathlib import Path

    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.documents.qagen import QASettings
    from ragsweep.documents.sources import location, locations
    from ragsweep.evaluation.leaderboard import build_board
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.models.llm import LLMSettings
    from ragsweep.results.patterns import write_patterns
    from ragsweep.results.report import best_metrics, render_html, render_markdown
    from ragsweep.sweep.settings import RunSettings
    from ragsweep.sweep.space import SearchSpace

    with pipeline_step():
        docs, *more_docs = locations(input_data_bucket_name, input_data_key, input_data_keys)
        settings = RunSettings(
            docs=docs,
            more_docs=tuple(more_docs),
            testset=location(test_data_bucket_name, test_data_key) if test_data_key else "",
            space=SearchSpace.from_dict(search_space),
            optimization_metric=optimization_metric,
            max_configs=0,  # the budget was checked when the space was built
            max_document_bytes=max_document_bytes,
            max_questions=max_questions,
            max_llm_calls=max_llm_calls,
            seed=seed,
            llm=LLMSettings.from_dict(llm),
            qa_generation=QASettings.from_dict(qa_generation),
            sweep_name=sweep_name,
        )
        testset = read_table(questions.path, "testset")
        answered = read_table(answers.path, "answers")
        texts = read_table(documents.path, "documents")
        board = build_board(
            read_table(scores.path, "scores"),
            answered,
            testset,
            settings.space.all_configs(),
            optimization_metric,
            settings=settings.record(testset, texts),
        )
        tables = {"leaderboard": leaderboard, "results": results, "breakdown": breakdown}
        for kind, artifact in {**tables, "failures": failures}.items():
            write_table(getattr(board, kind), artifact.path, kind)
        with open(report.path, "w", encoding="utf-8") as f:
            f.write(render_html(board))
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
            settings.space,
            settings.llm,
            patterns,
        )
        rag_patterns.metadata["patterns"] = [p.name for p in written]

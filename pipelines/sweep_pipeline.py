"""The ragsweep pipeline: ingest, fan out over chunk configurations, judge, rank, publish,
and compare with a baseline when one is given.

Reads top to bottom like the data flow in the README. Compile with ``make compile``; the
compiled YAML is committed beside this file.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import HTML, Dataset

from ragsweep.components.chunk_embed import chunk_embed
from ragsweep.components.compare import compare
from ragsweep.components.evaluate import evaluate
from ragsweep.components.ingest import ingest
from ragsweep.components.judge import judge
from ragsweep.components.plan import plan
from ragsweep.components.publish import publish
from ragsweep.components.rank import rank
from ragsweep.leaderboard import DEFAULT_METRIC
from ragsweep.space import SearchSpace

DEFAULT_SPACE = SearchSpace().to_dict()


class Results(NamedTuple):
    leaderboard: Dataset
    results: Dataset
    breakdown: Dataset
    failures: Dataset
    report: HTML
    run_id: str


@dsl.pipeline(
    name="ragsweep",
    description="Evaluate a grid of RAG configurations on a document collection and rank them.",
)
def sweep_pipeline(
    docs: str,
    testset: str,
    search_space: dict = DEFAULT_SPACE,
    optimization_metric: str = DEFAULT_METRIC,
    max_document_bytes: int = 0,
    max_questions: int = 0,
    seed: int = 42,
    embedding_cache: str = "",
    baseline: str = "",
) -> Results:
    inputs = ingest(
        docs=docs,
        testset=testset,
        max_document_bytes=max_document_bytes,
        max_questions=max_questions,
        seed=seed,
    )
    chunk_configs = plan(search_space=search_space)

    with dsl.ParallelFor(chunk_configs.output) as chunk_config:
        chunks = chunk_embed(
            documents=inputs.outputs["documents"],
            chunk_config=chunk_config,
            embedding_cache=embedding_cache,
        )
        answers = evaluate(
            chunks=chunks.outputs["chunks"],
            questions=inputs.outputs["questions"],
            search_space=search_space,
            chunk_config=chunk_config,
            embedding_cache=embedding_cache,
        )
        scores = judge(answers=answers.outputs["answers"], questions=inputs.outputs["questions"])

    ranked = rank(
        scores=dsl.Collected(scores.outputs["scores"]),
        answers=dsl.Collected(answers.outputs["answers"]),
        questions=inputs.outputs["questions"],
        docs=docs,
        testset=testset,
        search_space=search_space,
        optimization_metric=optimization_metric,
        max_document_bytes=max_document_bytes,
        max_questions=max_questions,
        seed=seed,
    )
    stored = publish(
        leaderboard=ranked.outputs["leaderboard"],
        results=ranked.outputs["results"],
        questions=inputs.outputs["questions"],
        pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    )
    with dsl.If(baseline != "", name="baseline-given"):
        compare(
            leaderboard=ranked.outputs["leaderboard"],
            results=ranked.outputs["results"],
            baseline=baseline,
            pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        )
    return Results(
        leaderboard=ranked.outputs["leaderboard"],
        results=ranked.outputs["results"],
        breakdown=ranked.outputs["breakdown"],
        failures=ranked.outputs["failures"],
        report=ranked.outputs["report"],
        run_id=stored.output,
    )


if __name__ == "__main__":
    from pathlib import Path

    from kfp import compiler

    compiler.Compiler().compile(sweep_pipeline, str(Path(__file__).with_suffix(".yaml")))

"""The ragsweep pipeline: ingest, fan out over chunk configurations, judge, rank.

Reads top to bottom like the data flow in the README. Compile with ``make compile``; the
compiled YAML is committed beside this file.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset

from ragsweep.components.chunk_embed import chunk_embed
from ragsweep.components.evaluate import evaluate
from ragsweep.components.ingest import ingest
from ragsweep.components.judge import judge
from ragsweep.components.plan import plan
from ragsweep.components.rank import rank
from ragsweep.leaderboard import DEFAULT_METRIC
from ragsweep.space import SearchSpace

DEFAULT_SPACE = SearchSpace().to_dict()


class Results(NamedTuple):
    leaderboard: Dataset
    scores: Dataset


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
        search_space=search_space,
        optimization_metric=optimization_metric,
    )
    return Results(leaderboard=ranked.outputs["leaderboard"], scores=ranked.outputs["all_scores"])


if __name__ == "__main__":
    from pathlib import Path

    from kfp import compiler

    compiler.Compiler().compile(sweep_pipeline, str(Path(__file__).with_suffix(".yaml")))

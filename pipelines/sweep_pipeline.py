"""The ragsweep pipeline: ingest (generate a test set when none is given), fan out over chunk
configurations, judge, rank.

Reads top to bottom like the data flow in the README. Compile with ``make compile``; the
compiled YAML is committed beside this file.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset

from ragsweep.components.chunk_embed import chunk_embed
from ragsweep.components.evaluate import evaluate
from ragsweep.components.generate_qa import generate_qa
from ragsweep.components.ingest import ingest
from ragsweep.components.judge import judge
from ragsweep.components.plan import plan
from ragsweep.components.rank import rank
from ragsweep.leaderboard import AUTO_METRIC
from ragsweep.llm import LLMSettings
from ragsweep.qagen import QASettings
from ragsweep.space import SearchSpace

DEFAULT_SPACE = SearchSpace().to_dict()
DEFAULT_LLM = LLMSettings().to_dict()
DEFAULT_QA = QASettings().to_dict()


class Results(NamedTuple):
    leaderboard: Dataset
    scores: Dataset
    testset: Dataset


@dsl.pipeline(
    name="ragsweep",
    description="Evaluate a grid of RAG configurations on a document collection and rank them.",
)
def sweep_pipeline(
    docs: str,
    testset: str = "",
    search_space: dict = DEFAULT_SPACE,
    optimization_metric: str = AUTO_METRIC,
    llm: dict = DEFAULT_LLM,
    qa_generation: dict = DEFAULT_QA,
) -> Results:
    inputs = ingest(docs=docs, testset=testset)
    # kfp.local runs no dsl.OneOf of artifacts, so the step always runs and passes a given
    # test set through
    questions = generate_qa(
        documents=inputs.outputs["documents"],
        given=inputs.outputs["questions"],
        qa_generation=qa_generation,
        llm=llm,
    )
    chunk_configs = plan(search_space=search_space)

    with dsl.ParallelFor(chunk_configs.output) as chunk_config:
        chunks = chunk_embed(documents=inputs.outputs["documents"], chunk_config=chunk_config)
        answers = evaluate(
            chunks=chunks.outputs["chunks"],
            questions=questions.outputs["questions"],
            search_space=search_space,
            chunk_config=chunk_config,
            llm=llm,
        )
        scores = judge(
            answers=answers.outputs["answers"], questions=questions.outputs["questions"], llm=llm
        )

    ranked = rank(
        scores=dsl.Collected(scores.outputs["scores"]),
        search_space=search_space,
        optimization_metric=optimization_metric,
    )
    return Results(
        leaderboard=ranked.outputs["leaderboard"],
        scores=ranked.outputs["all_scores"],
        testset=questions.outputs["questions"],
    )


if __name__ == "__main__":
    from pathlib import Path

    from kfp import compiler

    compiler.Compiler().compile(sweep_pipeline, str(Path(__file__).with_suffix(".yaml")))

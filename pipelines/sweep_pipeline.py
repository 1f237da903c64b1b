"""The ragsweep pipeline: ingest, fan out over chunk configurations, judge, rank.

Reads top to bottom like the data flow in the README. Compile with ``make compile``; the
compiled YAML is committed beside this file. Parameters take Red Hat AutoRAG's names where
the concept is the same; ``ragsweep.platform`` says how each step runs on OpenShift AI.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset

from ragsweep import platform
from ragsweep.components.build_space import build_space
from ragsweep.components.chunk_embed import chunk_embed
from ragsweep.components.evaluate import evaluate
from ragsweep.components.ingest import ingest
from ragsweep.components.judge import judge
from ragsweep.components.load_testset import load_testset
from ragsweep.components.plan import plan
from ragsweep.components.rank import rank
from ragsweep.leaderboard import DEFAULT_METRIC
from ragsweep.space import DEFAULT_MAX_CONFIGS, SearchSpace

DEFAULT = SearchSpace().to_parameters()


class Results(NamedTuple):
    leaderboard: Dataset
    scores: Dataset


@dsl.pipeline(
    name="ragsweep",
    description="Evaluate a grid of RAG configurations on a document collection and rank them.",
)
def sweep_pipeline(
    input_data_key: str,
    test_data_key: str,
    input_data_bucket_name: str = "",
    test_data_bucket_name: str = "",
    input_data_secret_name: str = platform.DEFAULT_CONNECTION,
    test_data_secret_name: str = platform.DEFAULT_CONNECTION,
    embedding_models: list = DEFAULT["embedding_models"],
    search_space: dict = DEFAULT["search_space"],
    optimization_metric: str = DEFAULT_METRIC,
    optimization_max_rag_patterns: int = DEFAULT_MAX_CONFIGS,
) -> Results:
    """Sweep RAG configurations over a document collection and rank them.

    Args:
        input_data_key: The documents: a folder or prefix in input_data_bucket_name; without
            a bucket, a local path (inside the image on a cluster) or an s3:// URI.
        test_data_key: The test data (.json Red Hat AutoRAG, .jsonl Giskard): an object in
            test_data_bucket_name; without a bucket, a local path or an s3:// URI.
        input_data_bucket_name: The documents' S3 bucket; empty: input_data_key is a location.
        test_data_bucket_name: The test data's S3 bucket; empty: test_data_key is a location.
        input_data_secret_name: The OpenShift AI S3 connection (Secret) to read documents with.
        test_data_secret_name: The OpenShift AI S3 connection (Secret) to read test data with.
        embedding_models: Embedding models: all-MiniLM-L6-v2 (in the image) or model folders.
        search_space: The other lists to sweep: chunkers, chunk_sizes (in the embedding
            model's tokens), chunk_overlaps, top_ks, search_types (similarity, mmr) and
            answerers (extractive: no LLM).
        optimization_metric: The metric to rank by.
        optimization_max_rag_patterns: The most configurations to evaluate (0: no limit); a
            larger search space stops the run at planning.
    """
    testset = platform.step(
        load_testset(bucket_name=test_data_bucket_name, key=test_data_key),
        s3_connection=test_data_secret_name,
        retry=True,
        cache=False,
    )
    inputs = platform.step(
        ingest(
            bucket_name=input_data_bucket_name,
            key=input_data_key,
            testset=testset.outputs["testset"],
        ),
        s3_connection=input_data_secret_name,
        retry=True,
        cache=False,
    )
    space = platform.step(
        build_space(
            search_space=search_space,
            embedding_models=embedding_models,
            max_configs=optimization_max_rag_patterns,
        )
    )
    chunk_configs = platform.step(plan(search_space=space.outputs["search_space"]))

    # Inside the loop kfp.local (2.17) resolves only pipeline parameters, the loop item and
    # artifacts: evaluate takes the search_space parameter (its retrieval and answer lists).
    with dsl.ParallelFor(chunk_configs.output) as chunk_config:
        chunks = platform.step(
            chunk_embed(documents=inputs.outputs["documents"], chunk_config=chunk_config)
        )
        answers = platform.step(
            evaluate(
                chunks=chunks.outputs["chunks"],
                questions=inputs.outputs["questions"],
                search_space=search_space,
                chunk_config=chunk_config,
            )
        )
        scores = platform.step(
            judge(answers=answers.outputs["answers"], questions=inputs.outputs["questions"])
        )

    ranked = platform.step(
        rank(
            scores=dsl.Collected(scores.outputs["scores"]),
            search_space=space.outputs["search_space"],
            optimization_metric=optimization_metric,
        )
    )
    return Results(leaderboard=ranked.outputs["leaderboard"], scores=ranked.outputs["all_scores"])


if __name__ == "__main__":
    import sys
    from pathlib import Path

    from kfp import compiler

    target = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).with_suffix(".yaml"))
    compiler.Compiler().compile(sweep_pipeline, target)

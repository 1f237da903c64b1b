from kfp import dsl
from kfp.dsl import Dataset, Input

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def plan(
    settings: Input[Dataset], questions: Input[Dataset], documents: Input[Dataset], groups: int = 0
) -> list:
    """Check the run's LLM-call budget against the test set and, when there is a memory
    limit (the run's ``memory_limit``, else on a cluster the heavy steps' pod limits),
    each heavy step's estimated peak against it (either too small stops the run here,
    before any embedding); deal the chunk configurations into ``groups`` groups, one per
    fan-out branch (0: one configuration per group), each crossed with the run's
    ``retrieval_question_blocks`` blocks of the questions. A space with query
    transformations needs the LLM endpoint (checked here) and their calls come out of the
    budget, as the deployed assistants' (``agents``) do."""
    import os

    from ragsweep.core.schemas import read_table
    from ragsweep.evaluation.scoring import AUTORAG_METRICS
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep import sizing
    from ragsweep.sweep.fanout import (
        document_sizes,
        group_chunk_configs,
        retrieval_items,
        shard_items,
    )
    from ragsweep.sweep.settings import read_settings
    from ragsweep.sweep.steps import check_transforms, plan_evaluation

    with pipeline_step():
        run = read_settings(settings.path)
        testset = read_table(questions.path, "testset")
        reserved = check_transforms(run.space, testset.num_rows)  # before any embedding
        plan_evaluation(
            run.space.all_configs(),
            testset.num_rows,
            run.llm,
            run.max_llm_calls,
            reserved,
            run.strategy,
            run.max_configs,
            autorag=run.optimization_metric in AUTORAG_METRICS,  # a rating beside each verdict
            agents=len(run.deployed()),  # the deployed assistants' calls come first
        )
        chunk_configs = run.space.chunk_configs()
        items = retrieval_items(
            group_chunk_configs(chunk_configs, groups),
            run.retrieval_question_blocks,
            testset.num_rows,
        )
        compiled = os.environ.get(sizing.MEMORY_LIMITS_ENV, "")
        limits, source = sizing.memory_limits(run.memory_limit, compiled)
        if limits:  # the documents are read only to be sized
            from ragsweep.models.embedding import load_tokenizer

            table = read_table(documents.path, "documents")
            whole = run.retrieval_question_blocks > 1
            shards = shard_items(chunk_configs, table, run.embedding_shard_bytes, whole)
            texts = table.column("text")
            per_token = {
                model: sizing.bytes_per_token(texts, load_tokenizer(model))
                for model in {c["embedding_model"] for c in chunk_configs}
            }
            peaks = sizing.estimate_peaks(
                document_sizes(table), items, shards, testset.num_rows, run.space, per_token
            )
            cluster = bool(compiled)  # the options to change are then submit's -p
            sizing.check_memory(peaks, limits, source, testset.num_rows, cluster)
        return items

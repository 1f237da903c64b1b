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
    from ragsweep.core.schemas import read_table
    from ragsweep.evaluation.scoring import AUTORAG_METRICS
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.fanout import group_chunk_configs, retrieval_items
    from ragsweep.sweep.settings import read_settings
    from ragsweep.sweep.steps import check_memory, check_transforms, plan_evaluation

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
        items = retrieval_items(
            group_chunk_configs(run.space.chunk_configs(), groups),
            run.retrieval_question_blocks,
            testset.num_rows,
        )
        check_memory(run, documents.path, items, testset.num_rows)
        return items

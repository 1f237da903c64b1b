from kfp import dsl
from kfp.dsl import Dataset, Input

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def plan(
    search_space: dict,
    questions: Input[Dataset],
    max_llm_calls: int,
    llm: dict,
    groups: int = 0,
    strategy: str = "grid",
    max_configs: int = 0,
) -> list:
    """Validate the search space, and the LLM-call budget of the ``strategy`` (grid,
    halving or model, answering at most ``max_configs`` configurations) against the test
    set (a budget too small stops the run here, before any embedding); deal the chunk
    configurations into ``groups`` groups, one per fan-out branch (0: one configuration
    per group)."""
    from ragsweep.core.schemas import read_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.models.llm import LLMSettings
    from ragsweep.sweep.fanout import group_chunk_configs
    from ragsweep.sweep.space import SearchSpace
    from ragsweep.sweep.steps import plan_evaluation

    with pipeline_step():
        space = SearchSpace.from_dict(search_space)
        testset = read_table(questions.path, "testset")
        plan_evaluation(
            space.all_configs(),
            testset.num_rows,
            LLMSettings.from_dict(llm),
            max_llm_calls,
            strategy,
            max_configs,
        )
        return group_chunk_configs(space.chunk_configs(), groups)

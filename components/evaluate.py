from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def evaluate(
    retrievals: Input[List[Dataset]],
    questions: Input[Dataset],
    search_space: dict,
    optimization_metric: str,
    max_llm_calls: int,
    seed: int,
    llm: dict,
    answers: Output[Dataset],
    scores: Output[Dataset],
    strategy: str = "grid",
    max_configs: int = 0,
):
    """Answer every question with every configuration and score the answers: with every
    metric, and with the LLM judge when ``llm`` names one (``judge``). When that would take
    more than ``max_llm_calls`` LLM calls (0: no limit), successive halving promotes the
    best configurations by ``optimization_metric`` to more questions (in a ``seed``-ed
    order); retrieval metrics always cover every question. ``strategy`` halving halves
    even within the budget; model answers at most ``max_configs`` configurations, chosen one
    at a time by a surrogate fitted on every configuration's retrieval metrics.

    Outputs: Arrow artifacts ``answers`` and ``scores`` (one row per config x question).
    """
    import pyarrow as pa

    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.models.llm import LLMSettings
    from ragsweep.sweep.space import SearchSpace
    from ragsweep.sweep.steps import evaluate as evaluate_all

    with pipeline_step():
        answered, scored = evaluate_all(
            pa.concat_tables([read_table(r.path, "retrievals") for r in retrievals]),
            read_table(questions.path, "testset"),
            SearchSpace.from_dict(search_space).all_configs(),
            optimization_metric,
            LLMSettings.from_dict(llm),
            max_llm_calls,
            seed,
            strategy,
            max_configs,
        )
        write_table(answered, answers.path, "answers")
        write_table(scored, scores.path, "scores")

from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def evaluate(
    settings: Input[Dataset],
    retrievals: Input[List[Dataset]],
    questions: Input[Dataset],
    answers: Output[Dataset],
    scores: Output[Dataset],
):
    """Answer every question with every configuration and score the answers: with every
    metric, and with the LLM judge when the run's ``llm`` names one (``judge``). When that
    would take more than the run's ``max_llm_calls`` LLM calls (0: no limit), successive
    halving promotes the best configurations by ``optimization_metric`` to more questions
    (in a ``seed``-ed order); retrieval metrics always cover every question.

    Outputs: Arrow artifacts ``answers`` and ``scores`` (one row per config x question).
    """
    import pyarrow as pa

    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.settings import read_settings
    from ragsweep.sweep.steps import evaluate as evaluate_all

    with pipeline_step():
        run = read_settings(settings.path)
        answered, scored = evaluate_all(
            pa.concat_tables([read_table(r.path, "retrievals") for r in retrievals]),
            read_table(questions.path, "testset"),
            run.space.all_configs(),
            run.optimization_metric,
            run.llm,
            run.max_llm_calls,
            run.seed,
        )
        write_table(answered, answers.path, "answers")
        write_table(scored, scores.path, "scores")

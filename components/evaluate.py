from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def evaluate(
    settings: Input[Dataset],
    retrievals: Input[List[Dataset]],
    questions: Input[Dataset],
    documents: Input[Dataset],
    answers: Output[Dataset],
    scores: Output[Dataset],
):
    """Answer every question with every configuration and score the answers: with every
    metric, and with the LLM judge when the run's ``llm`` names one (``judge``; of several,
    the one agreeing best with people's labels in the results store). When that would take
    more than the run's ``max_llm_calls`` LLM calls (0: no limit), successive halving
    promotes the best configurations by ``optimization_metric`` to more questions (in a
    ``seed``-ed order); retrieval metrics always cover every question. The run's
    ``strategy`` halving halves even within the budget; model answers at most
    ``max_configs`` configurations, chosen one at a time by a surrogate of every
    configuration's retrieval metrics (``ragsweep.evaluation.surrogate``), starting from
    what earlier runs of the named sweep in the results store measured on the same
    ``questions`` and ``documents`` (``ragsweep.store.warmstart``). Each of the run's
    ``agents`` (deployed assistants) answers every question once, its contexts located in
    the ``documents`` (``ragsweep.answering.agents``).

    Outputs: Arrow artifacts ``answers`` and ``scores`` (one row per config x question).
    """
    import pyarrow as pa

    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.curation.judge_choice import choose_judge
    from ragsweep.evaluation.leaderboard import resolve_metric
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.store.database import reading_url
    from ragsweep.store.warmstart import warm_start
    from ragsweep.sweep.settings import read_settings
    from ragsweep.sweep.steps import evaluate as evaluate_all

    with pipeline_step():
        run = read_settings(settings.path)
        testset = read_table(questions.path, "testset")
        llm = choose_judge(run.llm)
        metric = resolve_metric(run.optimization_metric, judged=bool(llm.judge))
        texts = read_table(documents.path, "documents")
        answered, scored = evaluate_all(
            pa.concat_tables([read_table(r.path, "retrievals") for r in retrievals]),
            testset,
            run.space.all_configs(),
            run.optimization_metric,
            llm,
            run.max_llm_calls,
            run.seed,
            run.strategy,
            run.max_configs,
            warm_start(run, testset, texts, metric, reading_url()),
            run.trials_at_once,
            run.deployed(),
            texts,
        )
        write_table(answered, answers.path, "answers")
        write_table(scored, scores.path, "scores")

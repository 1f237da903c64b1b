from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def judge(answers: Input[Dataset], questions: Input[Dataset], llm: dict, scores: Output[Dataset]):
    """Score every answer against its question's references with every registered metric,
    and with the LLM judge when ``llm`` names one (``judge``).

    Output: ``scores``, an Arrow artifact of kind scores (one row per config x question).
    """
    from ragsweep.errors import pipeline_step
    from ragsweep.judging import score_answers
    from ragsweep.llm import LLMSettings
    from ragsweep.schemas import read_table, write_table

    with pipeline_step():
        answered = read_table(answers.path, "answers")
        testset = read_table(questions.path, "testset")
        table = score_answers(answered, testset, LLMSettings.from_dict(llm))
        write_table(table, scores.path, "scores")

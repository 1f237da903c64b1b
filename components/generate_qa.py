from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def generate_qa(
    documents: Input[Dataset],
    given: Input[Dataset],
    qa_generation: dict,
    llm: dict,
    questions: Output[Dataset],
):
    """The test set the sweep uses: the ``given`` one, or when it is empty (no test set was
    named), one Giskard RAGET generates from the documents with ``qa_generation``.

    Output: ``questions``, an Arrow artifact of kind testset.
    """
    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.models.llm import LLMSettings

    with pipeline_step():
        table = read_table(given.path, "testset")
        if table.num_rows == 0:
            from ragsweep.documents.qagen import QASettings, generate_testset

            table = generate_testset(
                read_table(documents.path, "documents"),
                QASettings.from_dict(qa_generation),
                LLMSettings.from_dict(llm),
            )
        write_table(table, questions.path, "testset")

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def generate_qa(
    settings: Input[Dataset],
    documents: Input[Dataset],
    given: Input[Dataset],
    questions: Output[Dataset],
):
    """The test set the sweep uses: the ``given`` one, or when it is empty (no test set was
    named), one Giskard RAGET generates from the documents with the run's ``qa_generation``.

    Output: ``questions``, an Arrow artifact of kind testset.
    """
    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.settings import read_settings

    with pipeline_step():
        table = read_table(given.path, "testset")
        if table.num_rows == 0:
            from ragsweep.documents.qagen import generate_testset

            run = read_settings(settings.path)
            table = generate_testset(
                read_table(documents.path, "documents"), run.qa_generation, run.llm
            )
        write_table(table, questions.path, "testset")

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def ingest(
    settings: Input[Dataset],
    testset: Input[Dataset],
    documents: Output[Dataset],
    questions: Output[Dataset],
):
    """Read the documents under the run's locations (folders or s3:// URIs); resolve the
    test set's document IDs against them (``skip_unresolved``: leave out, with a warning,
    the questions whose references are found in no document, instead of failing); then
    sample ``max_questions`` questions and documents within ``max_document_bytes`` (0: all),
    cited documents first.

    Outputs: ``documents`` and ``questions``, Arrow artifacts of kinds documents and testset.
    """
    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.documents.sampling import sample_documents, sample_questions
    from ragsweep.documents.sources import read_locations
    from ragsweep.documents.testsets import resolve_testset
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.settings import read_settings

    with pipeline_step():
        run = read_settings(settings.path)
        read = read_locations([run.docs, *run.more_docs])
        docs_table = read.table
        questions_table = resolve_testset(
            read_table(testset.path, "testset"), docs_table, run.skip_unresolved, read.skipped
        )
        questions_table = sample_questions(questions_table, run.max_questions, run.seed)
        docs_table = sample_documents(docs_table, questions_table, run.max_document_bytes, run.seed)
        write_table(docs_table, documents.path, "documents")
        write_table(questions_table, questions.path, "testset")

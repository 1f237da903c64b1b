from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def ingest(
    bucket_name: str,
    key: str,
    keys: List[str],
    testset: Input[Dataset],
    max_document_bytes: int,
    max_questions: int,
    seed: int,
    documents: Output[Dataset],
    questions: Output[Dataset],
    skip_unresolved: bool = False,
):
    """Read the documents under ``s3://bucket_name/key``, or under ``key`` itself when no
    bucket is given (a folder or an s3:// URI), and under each of ``keys`` alike; resolve
    the test set's document IDs against them (``skip_unresolved``: leave out, with a
    warning, the questions whose references are found in no document, instead of failing);
    then sample ``max_questions`` questions and documents within ``max_document_bytes``
    (0: all), cited documents first.

    Outputs: ``documents`` and ``questions``, Arrow artifacts of kinds documents and testset.
    """
    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.documents.sampling import sample_documents, sample_questions
    from ragsweep.documents.sources import locations, read_locations
    from ragsweep.documents.testsets import resolve_testset
    from ragsweep.kubeflow.step import pipeline_step

    with pipeline_step():
        read = read_locations(locations(bucket_name, key, keys))
        docs_table = read.table
        questions_table = resolve_testset(
            read_table(testset.path, "testset"), docs_table, skip_unresolved, read.skipped
        )
        questions_table = sample_questions(questions_table, max_questions, seed)
        docs_table = sample_documents(docs_table, questions_table, max_document_bytes, seed)
        write_table(docs_table, documents.path, "documents")
        write_table(questions_table, questions.path, "testset")

from kfp import dsl
from kfp.dsl import Dataset, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def ingest(
    docs: str,
    testset: str,
    max_document_bytes: int,
    max_questions: int,
    seed: int,
    documents: Output[Dataset],
    questions: Output[Dataset],
):
    """Read the documents (folder or s3://bucket/prefix) and the test set (.json AutoRAG or
    .jsonl Giskard, local or S3), resolving its document IDs against the documents; then
    sample ``max_questions`` questions and documents within ``max_document_bytes`` (0: all).

    Outputs: ``documents`` and ``questions``, Arrow artifacts of kinds documents and testset.
    """
    from ragsweep.errors import pipeline_step
    from ragsweep.sampling import sample_documents, sample_questions
    from ragsweep.schemas import write_table
    from ragsweep.sources import read_documents
    from ragsweep.testset import load_testset, resolve_testset

    with pipeline_step():
        docs_table = read_documents(docs).table
        questions_table = resolve_testset(load_testset(testset), docs_table)
        questions_table = sample_questions(questions_table, max_questions, seed)
        docs_table = sample_documents(docs_table, questions_table, max_document_bytes, seed)
        write_table(docs_table, documents.path, "documents")
        write_table(questions_table, questions.path, "testset")

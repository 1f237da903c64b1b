from kfp import dsl
from kfp.dsl import Dataset, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def ingest(docs: str, testset: str, documents: Output[Dataset], questions: Output[Dataset]):
    """Read the documents (folder or s3://bucket/prefix) and the test set (.json AutoRAG or
    .jsonl Giskard, local or S3), resolving its document IDs against the documents. An empty
    ``testset`` gives an empty test set: the next step generates one.

    Outputs: ``documents`` and ``questions``, Arrow artifacts of kinds documents and testset.
    """
    from ragsweep.errors import pipeline_step
    from ragsweep.schemas import TESTSET, write_table
    from ragsweep.sources import read_documents
    from ragsweep.testset import load_testset, resolve_testset

    with pipeline_step():
        docs_table = read_documents(docs).table
        if testset:
            questions_table = resolve_testset(load_testset(testset), docs_table)
        else:
            questions_table = TESTSET.empty_table()
        write_table(docs_table, documents.path, "documents")
        write_table(questions_table, questions.path, "testset")

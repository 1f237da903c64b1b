from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def retrieve(
    settings: Input[Dataset],
    chunks: Input[Dataset],
    questions: Input[Dataset],
    chunk_group: dict,
    retrievals: Output[Dataset],
):
    """Retrieve for every question (of the item's question block, when retrieval is split)
    with every configuration sharing a chunk configuration of ``chunk_group`` (one chunk
    set of ``chunks`` at a time), in the run's space: each chunk set is loaded into each
    vector store and index of the space (connections from the RAGSWEEP_<STORE>_*
    environment; a block's collections named apart), and its collections dropped unless
    the run keeps them (``keep_collections``); the questions' vectors come with the
    chunks (else through the run's ``embedding_cache``, a folder or s3:// prefix; empty:
    none), so the model is not loaded.

    Output: ``retrievals``, an Arrow artifact of kind retrievals (one row per config x
    question: the retrieved chunks, their documents and texts, the store's recall against
    exact search, its query latency and index build time).
    """
    import os

    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.embeddings.cache import EmbeddingCache
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.retrieval.store_search import RUN_ID_ENV
    from ragsweep.sweep.fanout import block_run_id, question_block, question_vectors
    from ragsweep.sweep.settings import read_settings
    from ragsweep.sweep.steps import retrieve_group

    with pipeline_step():
        run = read_settings(settings.path)
        run.fix_runtimes()  # the run's, whatever device this step has
        if os.environ.get(RUN_ID_ENV):  # a split's blocks get collections of their own
            os.environ[RUN_ID_ENV] = block_run_id(os.environ[RUN_ID_ENV], chunk_group)
        table = retrieve_group(
            chunks.path,
            question_block(read_table(questions.path, "testset"), chunk_group),
            run.space,
            chunk_group["chunk_configs"],
            EmbeddingCache(run.embedding_cache, tiers=[question_vectors(chunks.path)]),
            run.keep_collections,
            run.llm,  # query transformations: concurrency and deadlines
        )
        write_table(table, retrievals.path, "retrievals")

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def retrieve(
    chunks: Input[Dataset],
    questions: Input[Dataset],
    configs: Input[Dataset],
    chunk_group: dict,
    embedding_cache: str,
    keep_collections: bool,
    retrievals: Output[Dataset],
):
    """Retrieve for every question with every configuration sharing a chunk configuration
    of ``chunk_group`` (one chunk set of ``chunks`` at a time), in the space ``build_space``
    validated (its ``configs`` artifact): each chunk set is loaded into each vector store
    and index of the space (connections from the RAGSWEEP_<STORE>_* environment), and its
    collections dropped unless ``keep_collections``; the questions' vectors come with the
    chunks (else through ``embedding_cache``, a folder or s3:// prefix; empty: none), so
    the model is not loaded.

    Output: ``retrievals``, an Arrow artifact of kind retrievals (one row per config x
    question: the retrieved chunks, their documents and texts, the store's recall against
    exact search, its query latency and index build time).
    """
    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.embeddings.cache import EmbeddingCache
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.fanout import question_vectors
    from ragsweep.sweep.space import space_of
    from ragsweep.sweep.steps import retrieve_group

    with pipeline_step():
        table = retrieve_group(
            chunks.path,
            read_table(questions.path, "testset"),
            space_of(read_table(configs.path, "configs")),
            chunk_group["chunk_configs"],
            EmbeddingCache(embedding_cache, tiers=[question_vectors(chunks.path)]),
            keep_collections,
        )
        write_table(table, retrievals.path, "retrievals")

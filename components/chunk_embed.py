from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def chunk_embed(
    settings: Input[Dataset],
    documents: Input[Dataset],
    chunk_group: dict,
    sharded: Input[Dataset],
    questions: Input[Dataset],
    chunks: Output[Dataset],
):
    """Chunk the documents with each chunk configuration of ``chunk_group`` (a ``plan``
    item), one at a time, and embed every chunk: first from the vectors the shard steps
    computed (``sharded``, read only), then from the run's ``embedding_cache`` (a folder or
    s3:// prefix; empty: a folder of this step's own), kept under its ``cache_max_gb`` GB by
    evicting the least recently used (0: no cap); the model embeds the rest, loaded once,
    and the test set's ``questions`` (those of the item's question block, when retrieval
    is split: the shard steps embedded every chunk set, so this step embeds no chunk).

    Output: ``chunks``, a folder of one Arrow artifact of kind chunks (text, character span,
    embedding) per chunk configuration, named by its id, and the questions' vectors.
    """
    import tempfile

    from ragsweep.core.schemas import read_table
    from ragsweep.embeddings.cache import EmbeddingCache
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.fanout import question_block
    from ragsweep.sweep.settings import read_settings
    from ragsweep.sweep.steps import build_chunk_sets

    with pipeline_step(), tempfile.TemporaryDirectory() as scratch:
        run = read_settings(settings.path)
        run.fix_runtimes()  # the run's, whatever device this step has
        build_chunk_sets(
            read_table(documents.path, "documents"),
            chunk_group["chunk_configs"],
            EmbeddingCache(run.embedding_cache or scratch, run.cache_max_gb, tiers=[sharded.path]),
            chunks.path,
            question_block(read_table(questions.path, "testset"), chunk_group),
        )

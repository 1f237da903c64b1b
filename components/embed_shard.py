from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def embed_shard(
    settings: Input[Dataset],
    documents: Input[Dataset],
    shard: dict,
    embeddings: Output[Dataset],
):
    """Chunk one shard of the documents (a ``plan_shards`` item) with its chunk
    configuration and embed the chunks, through the run's ``embedding_cache`` (a folder or
    s3:// prefix; empty: none) kept under its ``cache_max_gb`` GB (0: no cap).

    Output: ``embeddings``, a folder in the embedding cache's layout (text hash -> vector);
    empty for the placeholder item of a run that shards nothing.
    """
    from pathlib import Path

    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.fanout import is_shard

    with pipeline_step():
        Path(embeddings.path).mkdir(parents=True, exist_ok=True)
        if not is_shard(shard):
            return
        from ragsweep.core.schemas import read_table
        from ragsweep.embeddings.cache import EmbeddingCache
        from ragsweep.sweep.settings import read_settings
        from ragsweep.sweep.steps import embed_shard as embed

        run = read_settings(settings.path)
        run.fix_runtimes()  # the run's, whatever device this step has
        embed(
            read_table(documents.path, "documents"),
            shard,
            EmbeddingCache(run.embedding_cache, run.cache_max_gb),
            EmbeddingCache(embeddings.path),
        )

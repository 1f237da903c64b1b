from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def chunk_embed(
    documents: Input[Dataset],
    chunk_config: dict,
    embedding_cache: str,
    chunks: Output[Dataset],
    cache_max_gb: float = 0.0,
):
    """Chunk the documents with one chunk configuration and embed every chunk, reusing the
    embeddings stored in ``embedding_cache`` (a folder or s3:// prefix; empty: none), kept
    under ``cache_max_gb`` GB by evicting the least recently used (0: no cap).

    Output: ``chunks``, an Arrow artifact of kind chunks (text, character span, embedding).
    """
    from ragsweep.embedcache import EmbeddingCache
    from ragsweep.errors import pipeline_step
    from ragsweep.schemas import read_table, write_table
    from ragsweep.sweep import build_chunks

    with pipeline_step():
        documents_table = read_table(documents.path, "documents")
        table = build_chunks(
            documents_table, chunk_config, EmbeddingCache(embedding_cache, cache_max_gb)
        )
        write_table(table, chunks.path, "chunks")

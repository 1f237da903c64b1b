from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def chunk_embed(documents: Input[Dataset], chunk_config: dict, chunks: Output[Dataset]):
    """Chunk the documents with one chunk configuration and embed every chunk.

    Output: ``chunks``, an Arrow artifact of kind chunks (text, character span, embedding).
    """
    from ragsweep.errors import pipeline_step
    from ragsweep.schemas import read_table, write_table
    from ragsweep.sweep import build_chunks

    with pipeline_step():
        table = build_chunks(read_table(documents.path, "documents"), chunk_config)
        write_table(table, chunks.path, "chunks")

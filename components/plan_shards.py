from kfp import dsl
from kfp.dsl import Dataset, Input

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def plan_shards(settings: Input[Dataset], documents: Input[Dataset]) -> list:
    """List the shards embedded by parallel steps: every chunk configuration x run of
    documents of about the run's ``embedding_shard_bytes`` bytes of text, when the
    documents exceed it (0: never; then the list is empty); every chunk configuration over
    all the documents at least, when retrieval is split into question blocks (each block's
    ``chunk_embed`` then reads these vectors, and nothing is embedded twice)."""
    from ragsweep.core.schemas import read_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.fanout import shard_items
    from ragsweep.sweep.settings import read_settings

    with pipeline_step():
        run = read_settings(settings.path)
        return shard_items(
            run.space.chunk_configs(),
            read_table(documents.path, "documents"),
            run.embedding_shard_bytes,
            whole=run.retrieval_question_blocks > 1,
        )

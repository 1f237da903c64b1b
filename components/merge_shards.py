from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def merge_shards(shards: Input[List[Dataset]], embeddings: Output[Dataset]):
    """Gather the ``embed_shard`` steps' vectors into one folder in the embedding cache's
    layout (empty when no shard ran), read by every ``chunk_embed`` step before it embeds.
    """
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.fanout import merge_folders

    with pipeline_step():
        merge_folders([shard.path for shard in shards], embeddings.path)

from kfp import dsl
from kfp.dsl import Dataset, Input

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def plan_shards(search_space: dict, documents: Input[Dataset], embedding_shard_bytes: int) -> list:
    """List the shards embedded by parallel steps: every chunk configuration x run of
    documents of about ``embedding_shard_bytes`` bytes of text, when the documents exceed
    it (0: never; then the list is empty)."""
    from ragsweep.core.schemas import read_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.fanout import shard_items
    from ragsweep.sweep.space import SearchSpace

    with pipeline_step():
        chunk_configs = SearchSpace.from_dict(search_space).chunk_configs()
        return shard_items(
            chunk_configs, read_table(documents.path, "documents"), embedding_shard_bytes
        )

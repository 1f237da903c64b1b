from typing import List, NamedTuple

from kfp import dsl

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def build_space(search_space: dict, embedding_models: List[str], max_configs: int) -> NamedTuple(
    "Space", [("search_space", dict)]
):
    """Join the embedding models to the rest of the search space, validate it, and refuse a
    grid of more than ``max_configs`` configurations (0: no limit).

    Output: ``search_space``, the whole space. (Named: kfp.local 2.17 would hand a loop body
    its loop item for another task's unnamed ``Output``.)
    """
    from ragsweep.errors import pipeline_step
    from ragsweep.space import SearchSpace

    with pipeline_step():
        space = SearchSpace.from_parameters(search_space, embedding_models)
        space.check_budget(max_configs)
        return (space.to_dict(),)

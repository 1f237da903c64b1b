from kfp import dsl

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def plan(search_space: dict) -> list:
    """Validate the search space and list its chunk configurations, one per fan-out branch."""
    from ragsweep.errors import pipeline_step
    from ragsweep.space import SearchSpace

    with pipeline_step():
        return SearchSpace.from_dict(search_space).chunk_configs()

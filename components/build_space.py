from typing import List, NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def build_space(
    search_space: dict,
    embedding_models: List[str],
    generation_models: List[str],
    max_configs: int,
    preset: str,
    vector_io_provider_id: str,
    configs: Output[Dataset],
    sweep_name: str = "",
    strategy: str = "grid",
) -> NamedTuple("Space", [("search_space", dict)]):
    """Join the embedding and generation models to the rest of the search space, with Red
    Hat AutoRAG's ``preset`` and ``vector_io_provider_id`` in place of its chunk lists and
    stores when given (``ragsweep.kubeflow.autorag.apply``), validate it, and refuse a grid of more
    than ``max_configs`` configurations (0: no limit), unless the ``strategy`` is model
    (then ``max_configs`` bounds the configurations it answers, not the space). A
    ``sweep_name`` that cannot name a sweep fails here too, before the sweep's work rather
    than at its end.

    Outputs: ``search_space``, the whole space (named: kfp.local 2.17 would hand a loop body
    its loop item for another task's unnamed ``Output``); ``configs``, an Arrow artifact of
    kind configs (every configuration, with its prefixes, and the space in its metadata),
    for the steps inside the fan-out, where kfp.local resolves artifacts but not parameters
    of other tasks.
    """
    from ragsweep.core.schemas import write_table
    from ragsweep.kubeflow.autorag import apply
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.settings import check_sweep_name
    from ragsweep.sweep.space import SearchSpace, configs_table

    with pipeline_step():
        check_sweep_name(sweep_name, "sweep_name")
        search_space = apply(search_space, preset, vector_io_provider_id)
        space = SearchSpace.from_parameters(search_space, embedding_models, generation_models)
        if strategy != "model":
            space.check_budget(max_configs)
        space.log_prefixes()
        write_table(configs_table(space), configs.path, "configs")
        return (space.to_dict(),)

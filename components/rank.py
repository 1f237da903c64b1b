from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def rank(
    scores: Input[List[Dataset]],
    search_space: dict,
    optimization_metric: str,
    leaderboard: Output[Dataset],
    all_scores: Output[Dataset],
):
    """Rank every configuration by ``optimization_metric`` over the collected scores.

    Outputs: ``leaderboard`` (Arrow, kind leaderboard) and ``all_scores`` (Arrow, kind
    scores: every configuration x question).
    """
    import pyarrow as pa

    from ragsweep.errors import pipeline_step
    from ragsweep.leaderboard import rank_configs
    from ragsweep.schemas import read_table, write_table
    from ragsweep.space import SearchSpace

    with pipeline_step():
        table = pa.concat_tables([read_table(s.path, "scores") for s in scores])
        configs = SearchSpace.from_dict(search_space).all_configs()
        write_table(
            rank_configs(table, configs, optimization_metric), leaderboard.path, "leaderboard"
        )
        write_table(table, all_scores.path, "scores")

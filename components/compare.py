from kfp import dsl
from kfp.dsl import Dataset, Input, Markdown, Metrics, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def compare(
    leaderboard: Input[Dataset],
    results: Input[Dataset],
    baseline: str,
    pipeline_run_id: str,
    comparison: Output[Dataset],
    summary: Output[Markdown],
    verdict: Output[Metrics],
    deployed_config: str = "",
):
    """Compare this run with a baseline from the results database (``RAGSWEEP_STORE_URL``):
    a run id, or ``latest`` for the latest successful run of the same sweep, on the
    configurations and questions both share. ``deployed_config`` (a config id or the YAML
    ``ragsweep best`` prints) is the configuration the alarm tests; empty: the sweep's best.

    Outputs: ``comparison`` (Arrow, kind comparison), a Markdown ``summary`` (with what only
    one run holds), and the ``verdict`` metrics: ``best_regressed`` = 1 when the alarm fired,
    its ``alarm_p_value``, and the counts of shared, added, removed and edited questions and
    configurations.
    """
    from ragsweep.errors import pipeline_step
    from ragsweep.regression import compare_with_store, render, verdict_metrics
    from ragsweep.schemas import read_table, write_table

    with pipeline_step():
        current = (read_table(leaderboard.path, "leaderboard"), read_table(results.path, "results"))
        result = compare_with_store(baseline, current, pipeline_run_id, deployed_config)
        write_table(result.table, comparison.path, "comparison")
        with open(summary.path, "w", encoding="utf-8") as f:
            f.write(render(result, "markdown") + "\n")
        for name, value in verdict_metrics(result).items():
            verdict.log_metric(name, value)

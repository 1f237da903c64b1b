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
    configurations. When ``latest`` finds no earlier run of the sweep, the comparison is
    empty, the summary says so and ``baseline_found`` = 0 (else 1).
    """
    from ragsweep.core.schemas import COMPARISON, read_table, write_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.results.regression import NO_BASELINE, compare_with_store, render, verdict_metrics

    with pipeline_step():
        current = (read_table(leaderboard.path, "leaderboard"), read_table(results.path, "results"))
        result = compare_with_store(baseline, current, pipeline_run_id, deployed_config)
        table = result.table if result else COMPARISON.empty_table()
        write_table(table, comparison.path, "comparison")
        with open(summary.path, "w", encoding="utf-8") as f:
            f.write((render(result, "markdown") if result else NO_BASELINE.capitalize()) + "\n")
        metrics = verdict_metrics(result) if result else {"baseline_found": 0.0}
        for name, value in metrics.items():
            verdict.log_metric(name, value)

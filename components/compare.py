from kfp import dsl
from kfp.dsl import HTML, Dataset, Input, Markdown, Metrics, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def compare(
    leaderboard: Input[Dataset],
    results: Input[Dataset],
    run_report: Input[HTML],
    baseline: str,
    pipeline_run_id: str,
    comparison: Output[Dataset],
    summary: Output[Markdown],
    report: Output[HTML],
    verdict: Output[Metrics],
    deployed_config: str = "",
):
    """Compare this run with a baseline from the results database (``RAGSWEEP_STORE_URL``):
    a run id, or ``latest`` for the latest successful run of the same sweep (its name, else
    its sweep key), on the configurations and questions both share. ``deployed_config`` (a
    config id or the YAML ``ragsweep best`` prints) is the configuration the alarm tests;
    empty: the sweep's best.

    Outputs: ``comparison`` (Arrow, kind comparison), a Markdown ``summary`` (what changed
    since the baseline: documents added, removed and edited, test set, grid; what only one
    run holds; the alarm), the rank step's ``run_report`` with that comparison in it as
    ``report``, and the ``verdict`` metrics: ``best_regressed`` = 1 when the alarm fired,
    its ``alarm_p_value``, the counts of shared, added, removed and edited questions and
    configurations, and of added, removed and edited documents. When ``latest`` finds no
    earlier run of the sweep, the comparison is empty, the summary and report say so and
    ``baseline_found`` = 0 (else 1).
    """
    from ragsweep.core.schemas import COMPARISON, read_table, write_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.reporting.regression import (
        compare_with_store,
        no_baseline,
        render,
        verdict_metrics,
    )
    from ragsweep.reporting.report import comparison_section, with_comparison

    with pipeline_step():
        current = (read_table(leaderboard.path, "leaderboard"), read_table(results.path, "results"))
        result = compare_with_store(baseline, current, pipeline_run_id, deployed_config)
        table = result.table if result else COMPARISON.empty_table()
        write_table(table, comparison.path, "comparison")
        missing = "" if result else no_baseline(current[0])
        with open(summary.path, "w", encoding="utf-8") as f:
            f.write((render(result, "markdown") if result else missing) + "\n")
        with open(run_report.path, encoding="utf-8") as f:
            html = with_comparison(f.read(), comparison_section(result, missing))
        with open(report.path, "w", encoding="utf-8") as f:
            f.write(html)
        metrics = verdict_metrics(result) if result else {"baseline_found": 0.0}
        for name, value in metrics.items():
            verdict.log_metric(name, value)

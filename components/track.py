from kfp import dsl
from kfp.dsl import HTML, Dataset, Input

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def track(
    leaderboard: Input[Dataset],
    report: Input[HTML],
    mlflow_tracking_uri: str,
    pipeline_run_id: str,
) -> str:
    """Log the sweep to MLflow at ``mlflow_tracking_uri``, else ``MLFLOW_TRACKING_URI`` (from
    a secret): a parent run with the settings, best configuration, ``leaderboard`` and
    ``report``, and a child run per configuration. Skip when neither is set; when MLflow
    fails, warn and keep the run. Returns the parent run's id, or ''."""
    from ragsweep.core.schemas import read_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.reporting.tracking import log_from_step
    from ragsweep.store.database import current_run_id

    with pipeline_step():
        return log_from_step(
            read_table(leaderboard.path, "leaderboard"),
            report.path,
            mlflow_tracking_uri,
            current_run_id(pipeline_run_id),
        )

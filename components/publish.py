from kfp import dsl
from kfp.dsl import Dataset, Input

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def publish(
    leaderboard: Input[Dataset],
    results: Input[Dataset],
    questions: Input[Dataset],
    pipeline_run_id: str,
) -> str:
    """Store the run in the results database named by the ``RAGSWEEP_STORE_URL`` environment
    variable (from a secret); skip when it is unset. Returns the stored run id, or ''."""
    from ragsweep.core.schemas import read_table
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.reporting.publishing import publish_from_step

    with pipeline_step():
        return publish_from_step(
            read_table(leaderboard.path, "leaderboard"),
            read_table(results.path, "results"),
            read_table(questions.path, "testset"),
            pipeline_run_id,
        )

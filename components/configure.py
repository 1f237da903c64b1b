from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def configure(
    input_data_bucket_name: str,
    input_data_key: str,
    input_data_keys: List[str],
    test_data_bucket_name: str,
    test_data_key: str,
    embedding_models: List[str],
    generation_models: List[str],
    search_space: dict,
    preset: str,
    vector_io_provider_id: str,
    optimization_metric: str,
    optimization_max_rag_patterns: int,
    max_document_bytes: int,
    max_questions: int,
    max_llm_calls: int,
    strategy: str,
    trials_at_once: int,
    seed: int,
    skip_unresolved: bool,
    embedding_cache: str,
    cache_max_gb: float,
    embedding_shard_bytes: int,
    baseline: str,
    keep_collections: bool,
    llm: dict,
    qa_generation: dict,
    patterns: int,
    sweep_name: str,
    agents: List[str],
    settings: Output[Dataset],
):
    """Build and validate the run's settings from the pipeline's parameters, once
    (``ragsweep.kubeflow.parameters``): a mistake in any of them (a search space, a grid
    larger than ``optimization_max_rag_patterns``, a metric, a sweep name, a test data
    location) fails here, before any data is read.

    Each embedding model's runtime is fixed here, once (PyTorch when the pipeline was
    compiled with GPUs for the embedding steps, else the default), with its identity.

    Output: ``settings``, an Arrow artifact of kind settings (every configuration, one row
    each; the settings in its metadata), which every later step reads instead of
    parameters: one source for what the run means.
    """
    parameters = {name: value for name, value in locals().items() if name != "settings"}
    from ragsweep.kubeflow.parameters import run_settings
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.kubeflow.tasks import embedding_gpus
    from ragsweep.sweep.settings import with_runtimes, write_settings

    with pipeline_step():
        run = with_runtimes(run_settings(parameters), embedding_gpus())
        run.space.log_prefixes()
        write_settings(run, settings.path)

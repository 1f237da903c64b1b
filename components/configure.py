"""The pipeline's first step: the run's settings, built and validated once.

KFP reads a component's parameters from its function's source, and configure takes every
run option the pipeline has: so its source is written here from their declarations
(``ragsweep.kubeflow.parameters.configure_parameters``), never by hand."""

import linecache

from kfp import dsl

from ragsweep.components import BASE_IMAGE
from ragsweep.kubeflow.parameters import configure_parameters

BODY = '''
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
        run.space.log_pruned()
        run.space.log_prefixes()
        write_settings(run, settings.path)
'''
KFP_TYPES = {str: "str", int: "int", float: "float", bool: "bool", list: "List", dict: "dict"}


def _configure():
    """The component, from its source: the parameters' signature and ``BODY``."""
    signature = ", ".join(f"{n}: {KFP_TYPES[t]}" for n, t in configure_parameters().items())
    source = f"def configure({signature}, settings: Output[Dataset]):{BODY}"
    filename = "<ragsweep configure>"  # where inspect, and so KFP, finds the source
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": __name__, "List": list, **vars(dsl)}
    exec(compile(source, filename, "exec"), namespace)
    return dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)(namespace["configure"])


configure = _configure()

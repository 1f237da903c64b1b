from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def load_testset(settings: Input[Dataset], testset: Output[Dataset]):
    """Read the run's test data (.json AutoRAG, .jsonl Giskard or a ragsweep .arrow test
    set): a local path or an s3:// URI; ``store:<name>`` is the stored test set ``name`` as
    it is now, read from the results database ``RAGSWEEP_STORE_URL`` names. No test data
    gives an empty test set, which the ``generate_qa`` step then fills.

    Output: ``testset``, an Arrow artifact of kind testset, its document IDs as given.
    """
    from ragsweep.core.schemas import write_table
    from ragsweep.curation.stored_sets import load_test_data
    from ragsweep.kubeflow.step import pipeline_step
    from ragsweep.sweep.settings import read_settings

    with pipeline_step():
        uri = read_settings(settings.path).testset
        write_table(load_test_data(uri), testset.path, "testset")

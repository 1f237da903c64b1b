from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from ragsweep.components import BASE_IMAGE


@dsl.component(base_image=BASE_IMAGE, install_kfp_package=False)
def evaluate(
    chunks: Input[Dataset],
    questions: Input[Dataset],
    search_space: dict,
    chunk_config: dict,
    embedding_cache: str,
    llm: dict,
    answers: Output[Dataset],
):
    """Retrieve and answer every question with every configuration sharing ``chunk_config``;
    questions are embedded through ``embedding_cache`` (a folder or s3:// prefix; empty:
    none); model answerers (``llm:<model>``) use the ``llm`` settings.

    Output: ``answers``, an Arrow artifact of kind answers (one row per config x question).
    """
    from ragsweep.embedcache import EmbeddingCache
    from ragsweep.errors import pipeline_step
    from ragsweep.llm import LLMSettings
    from ragsweep.schemas import read_table, write_table
    from ragsweep.space import SearchSpace
    from ragsweep.sweep import evaluate as evaluate_grid

    with pipeline_step():
        table = evaluate_grid(
            read_table(chunks.path, "chunks"),
            read_table(questions.path, "testset"),
            SearchSpace.from_dict(search_space),
            chunk_config,
            EmbeddingCache(embedding_cache),
            LLMSettings.from_dict(llm),
        )
        write_table(table, answers.path, "answers")

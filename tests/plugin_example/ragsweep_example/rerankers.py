"""A reranker kind, ``overlap:<n>``: a passage scores the number of the question's words (of
at least ``n`` letters) it holds."""

from __future__ import annotations

import re

import numpy as np

from ragsweep.retrieval.reranking import RerankerKind

WORD = re.compile(r"\w+")


class OverlapReranker:
    whole_lists = False  # a passage's score is its own

    def __init__(self, name: str, shortest: int) -> None:
        self.name, self.shortest = name, shortest

    def score(self, items):
        out = []
        for question, passages in items:
            asked = {w for w in WORD.findall(question.lower()) if len(w) >= self.shortest}
            held = [len(asked & set(WORD.findall(p.lower()))) for p in passages]
            out.append((np.asarray(held, np.float64), 0.0))
        return out


OVERLAP = RerankerKind(
    "the shortest word counted",  # the argument, for messages
    lambda name, n: OverlapReranker(name, int(n)),  # make(name, argument)
    lambda n: None if n.isdigit() else f"{n} is not a number of letters",  # check, before the run
)

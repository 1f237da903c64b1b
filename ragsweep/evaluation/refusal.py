"""Does an answer refuse? A check with no model, for out-of-scope questions.

An answer refuses when it contains one of ``REFUSALS``: short phrases that say the
assistant cannot answer, has no information, or that the context or documentation does not
hold the answer, in English, German, French, Spanish, Chinese and Japanese. The phrases are
matched on the answer folded like every lexical metric (``text.fold``: case and accents
dropped) with its white space collapsed. The list is deliberately small: an answer that
refuses in other words, or in another language, is not recognised (judge it with an LLM,
``--judge``), and an answer that says "I cannot find X, but Y" counts as a refusal.
"""

from __future__ import annotations

import re

from ragsweep.core.text import fold

REFUSALS: tuple[str, ...] = (
    # English
    r"\b(cannot|can ?not|can't|unable to|not able to|could not|couldn't) "
    r"(answer|find|determine|tell)\b",
    r"\b(cannot|can ?not|can't) be answered\b",
    r"\b(no|not enough|insufficient|no sufficient|no relevant) information "
    r"(is |was )?(available|provided|given|about|on|in|to|regarding|for)\b",
    r"\bnot (mentioned|provided|covered|stated|specified|included|found) in the "
    r"(context|documentation|documents?|passages?|sources?)\b",
    r"\bthe (context|documentation|documents?|passages?) (does|do|did) not "
    r"(contain|mention|say|provide|specify|cover|include)\b",
    r"\bi (do not|don't) know\b",
    # German
    r"\bkann (ich )?(diese frage |die frage )?nicht beantwort",
    r"\bnicht beantwortet werden\b",
    r"\bkeine (angaben|informationen|information)\b",
    r"\bnicht (im kontext|in der dokumentation|in den dokumenten)\b",
    r"\bweiss ich nicht\b",
    # French (accents folded: répondre -> repondre)
    r"\b(ne peux|ne peut|ne pouvons) pas (repondre|trouver|determiner)\b",
    r"\bimpossible de (repondre|trouver|determiner)\b",
    r"\b(pas d'|aucune )information",
    r"\b(le contexte|la documentation|les documents) ne "
    r"(contient|contiennent|mentionne|mentionnent|precise|precisent) pas\b",
    r"\bje ne sais pas\b",
    # Spanish
    r"\bno (puedo|es posible) (responder|contestar|encontrar|determinar)\b",
    r"\bno (hay|tengo|dispongo de) (suficiente )?informacion\b",
    r"\bno se (menciona|especifica|indica)\b",
    # Chinese
    r"无法回答|不能回答|无法确定|无法找到|没有找到|未提及|没有提及|没有提到|未提供|没有提供"
    r"|没有相关信息|没有足够的信息|信息不足|不知道",
    # Japanese
    r"回答できません|答えられません|お答えできません|情報がありません|記載がありません|わかりません|分かりません",
)
_REFUSAL = re.compile("|".join(f"(?:{p})" for p in REFUSALS))


def refuses(answer: str | None) -> bool:
    """Whether ``answer`` says it cannot answer (one of ``REFUSALS``)."""
    if not answer:
        return False
    text = " ".join(fold(answer).replace("\u2019", "'").split())
    return _REFUSAL.search(text) is not None

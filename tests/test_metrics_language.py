"""Lexical metrics on German, French and Chinese answers: overlap is counted on real words
(or character pairs), so a shared number alone never makes an answer right."""

import pytest

from ragsweep.evaluation.metrics import Answered, answer_correctness, faithfulness, token_recall


def item(reference: str, answer: str, context: str | None = None) -> Answered:
    return Answered(
        reference_answers=[reference],
        reference_doc_ids=["d.md"],
        retrieved_doc_ids=["d.md"],
        context=reference if context is None else context,
        answer=answer,
    )


LEXICAL = {"answer_correctness": answer_correctness, "faithfulness": faithfulness}


def test_german_answer_shares_the_words_it_shares():
    scored = item("Die maximale Größe beträgt 30 MB", "Größe: 30 MB")
    # reference tokens: die maximale grosse betragt 30 mb -> three found
    assert answer_correctness(scored) == pytest.approx(3 / 6)
    assert faithfulness(scored) == 1.0
    assert answer_correctness(item("Die Größe ist über 30 MB", "die grosse ist uber 30 mb")) == 1.0


def test_french_answer_matches_without_its_accents():
    # les sauvegardes sont conservees 30 jours: no French stop word list, so six tokens
    assert token_recall("Les sauvegardes sont conservées 30 jours", "conservees 30 jours") == (
        pytest.approx(3 / 6)
    )


@pytest.mark.parametrize(
    ("reference", "answer"),
    [
        ("最大文件大小为30 MB。", "保留时间为30天。"),
        ("最大文件大小为30MB。", "价格是30MB套餐。"),
        ("The maximum upload size is 30 MB.", "Support replies within 30 minutes."),
    ],
)
def test_no_lexical_metric_is_perfect_for_an_answer_sharing_only_a_number(reference, answer):
    # the reference is also the retrieved context: faithfulness sees the same overlap
    for name, metric in LEXICAL.items():
        assert metric(item(reference, answer)) < 1.0, name


@pytest.mark.parametrize("reference", ["Backups are kept for 30 days.", "备份保留30天。"])
def test_a_bare_number_is_not_a_whole_reference_answer(reference):
    # (it is faithful: the context does say 30)
    assert answer_correctness(item(reference, "30")) < 0.5


def test_chinese_answer_scores_its_shared_character_pairs():
    reference = "管理控制台使用9000端口。"
    # 管理 理控 控制 制台 台使 使用 9000 端口: the answer misses the first two
    assert answer_correctness(item(reference, "控制台使用9000端口")) == pytest.approx(6 / 8)
    # "the default port is 8443" shares only 端口 (port)
    assert answer_correctness(item(reference, "默认端口是8443")) == pytest.approx(1 / 8)

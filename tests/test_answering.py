import pytest

from ragsweep.answering.answerers import ANSWERERS, extractive
from ragsweep.answering.answers import parse_history, with_history


@pytest.mark.parametrize(
    ("question", "passages", "max_sentences", "expected"),
    [
        pytest.param(
            "Which port does the admin console use?",
            [
                "Tidewater is a sync server. It listens on port 8443 by default.",
                "The admin console uses port 9000. Logs rotate daily.",
            ],
            1,
            "The admin console uses port 9000.",
            id="the sentence that matches the question",
        ),
        pytest.param(
            "How many days does Pro keep backups?",
            ["Plans: Basic keeps backups 30 days.", "Pro keeps backups 90 days."],
            None,
            "Plans: Basic keeps backups 30 days. Pro keeps backups 90 days.",
            id="in retrieval order, never invented",
        ),
        pytest.param("Anything?", [], None, "", id="nothing retrieved: empty"),
        pytest.param(
            "管理控制台使用哪个端口？",
            [
                "Tidewater是一个同步服务器。它默认监听8443端口。",
                "管理控制台使用9000端口。日志每天轮换。",
            ],
            1,
            "管理控制台使用9000端口。",
            id="the right Chinese sentence",
        ),
        pytest.param(
            "Was ist die MAXIMALE Grösse?",
            ["Die Datei wird täglich gesichert. Die maximale Größe beträgt 30 MB."],
            1,
            "Die maximale Größe beträgt 30 MB.",
            id="German words without their accents",
        ),
    ],
)
def test_extractive_answer(question, passages, max_sentences, expected):
    options = {} if max_sentences is None else {"max_sentences": max_sentences}
    assert extractive(question, passages, **options) == expected


def test_a_conversational_question_is_answered_with_the_users_earlier_turns():
    history = parse_history(
        '[{"role": "user", "content": "I administer the admin console."},'
        ' {"role": "assistant", "content": "How can I help you with that?"}]'
    )
    passages = [
        "Tidewater listens on port 8443 by default. The sync protocol uses port 7420.",
        "The admin console uses port 9000.",
    ]
    question = "Which port does it use?"
    assert with_history(question, history) == f"I administer the admin console.\n{question}"
    [alone, with_turns] = ANSWERERS["extractive"](
        [(question, passages), (question, passages, history)]
    )
    assert "9000" not in alone.text  # every sentence names a port: the first two win
    assert (
        with_turns.text
        == "Tidewater listens on port 8443 by default. The admin console uses port 9000."
    )


def test_history_keeps_roles_and_tolerates_none():
    raw = '[{"role": "User", "content": "hi"}, {"role": "tool", "content": "x"}, {"role": "a"}]'
    assert parse_history(raw) == (("user", "hi"), ("user", "x"))
    assert parse_history(None) == parse_history("") == parse_history("[]") == ()


def test_extractive_answers_are_the_same_whatever_the_hash_seed():
    # a sentence's score summed its words in set order, which the hash seed decides: near
    # ties went either way from one process to the next (2 of 4 seeds differed here)
    import subprocess
    import sys

    script = """
import json, random
from ragsweep.answering.answerers import extractive
rng = random.Random(0)
vocab = [f"w{i}x" for i in range(40)]
answers = []
for _ in range(400):
    passages = [
        " ".join(" ".join(rng.sample(vocab, 6)).capitalize() + "." for _ in range(4))
        for _ in range(3)
    ]
    answers.append(extractive(" ".join(rng.sample(vocab, 8)) + "?", passages))
print(json.dumps(answers))
"""
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={"PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3, 4)
    }
    assert len(outputs) == 1 and len(next(iter(outputs))) > 400

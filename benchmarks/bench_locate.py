"""How well answers written in other words are located in their documents, and how fast.

The set (tests/locating/, described in its README): real documentation (the example
knowledge base examples/docs, and the READMEs of defusedxml 0.7.1 and python-dotenv 1.2.4)
and three kinds of answers, each naming its document as an AutoRAG question does:

- reworded: sentences of the documents reworded by ``reword`` (lower case, punctuation
  dropped, one word in four left out, two words swapped, numbers written as words);
- paraphrased: answers written by hand in other words (paraphrased.json), each with the
  document's sentence it restates;
- random: words drawn at random from the whole corpus, which no document says;
- elsewhere: a sentence of another document, reworded, named against this one (the same
  product's vocabulary, said elsewhere).

Each answer goes through ``resolve_testset`` as a test set would, and counts as located
when it gets a gold span, and as right when that span overlaps the sentence it restates.
Run: ``.venv/bin/python benchmarks/bench_locate.py`` (add ``--size-mb 1`` to time one
document of that size). tests/test_locating.py asserts the thresholds on the same figures.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from pathlib import Path

import pyarrow as pa

from ragsweep.core.schemas import TESTSET
from ragsweep.core.text import locate, placed, sentences
from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset, resolve_testset

ROOT = Path(__file__).resolve().parent.parent
SET = ROOT / "tests" / "locating"
EXAMPLES = ROOT / "examples"
SEED = 35
REWORDED_PER_DOCUMENT = 6
RANDOM_ANSWERS = 40
RANDOM_WORDS = 8

_NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()
_NUMBER_WORDS += "thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_EDGE_PUNCTUATION = re.compile(r"[^\w\s]+(?=\s|$)|(?:(?<=\s)|^)[^\w\s]+")


def number_word(number: int) -> str:
    """``number`` (0 to 99) written as a word: 7 is "seven", 45 is "forty-five"."""
    if number < 20:
        return _NUMBER_WORDS[number]
    tens, unit = divmod(number, 10)
    return _TENS[tens - 2] + (f"-{_NUMBER_WORDS[unit]}" if unit else "")


def reword(sentence: str, rng: random.Random) -> str:
    """``sentence`` as a hurried person retypes it: lower case, the punctuation at word
    edges dropped, numbers under 100 as words, one word in four left out, and two
    neighbouring words swapped."""
    text = _EDGE_PUNCTUATION.sub("", sentence.lower())
    tokens = [number_word(int(t)) if t.isdigit() and int(t) < 100 else t for t in text.split()]
    kept = [t for i, t in enumerate(tokens) if i % 4 != 3]
    if len(kept) > 2:
        i = rng.randrange(len(kept) - 1)
        kept[i], kept[i + 1] = kept[i + 1], kept[i]
    return " ".join(kept)


def corpus() -> dict[str, str]:
    """doc_id -> text: the example knowledge base and the set's own documents."""
    texts = {}
    for root in (EXAMPLES / "docs", SET / "docs"):
        table = read_documents(str(root)).table
        texts |= dict(zip(table["doc_id"].to_pylist(), table["text"].to_pylist(), strict=True))
    return texts


def prose(text: str) -> list[tuple[int, int]]:
    """The spans of ``text``'s sentences that read as prose: 8 to 40 words, mostly letters."""
    pieces = sentences(text)
    return [
        span
        for piece, span in zip(pieces, placed(text, pieces), strict=True)
        if 8 <= len(piece.split()) <= 40 and sum(c.isalpha() for c in piece) > 0.7 * len(piece)
    ]


def answers(texts: dict[str, str]) -> list[dict]:
    """Every answer of the set: kind, doc_id, answer, and (start, end) of what it restates
    (None for random words)."""
    rng = random.Random(SEED)
    out = []
    for doc_id in sorted(texts):
        text = texts[doc_id]
        spans = prose(text)
        for start, end in rng.sample(spans, min(REWORDED_PER_DOCUMENT, len(spans))):
            answer = reword(text[start:end], rng)
            out.append({"kind": "reworded", "doc_id": doc_id, "answer": answer, "at": (start, end)})
    for item in json.loads((SET / "paraphrased.json").read_text(encoding="utf-8")):
        at = locate(texts[item["doc_id"]], item["says"], unique=True)
        if at is None:
            raise ValueError(f"paraphrased.json: {item['says']!r} is not once in {item['doc_id']}")
        out.append(
            {"kind": "paraphrased", "doc_id": item["doc_id"], "answer": item["answer"], "at": at}
        )
    for doc_id in sorted(texts):  # a sentence of another document, reworded
        other = rng.choice([d for d in sorted(texts) if d != doc_id])
        start, end = rng.choice(prose(texts[other]))
        answer = reword(texts[other][start:end], rng)
        out.append({"kind": "elsewhere", "doc_id": doc_id, "answer": answer, "at": None})
    vocabulary = sorted({w for text in texts.values() for w in re.findall(r"[A-Za-z]{3,}", text)})
    for _ in range(RANDOM_ANSWERS):
        answer = " ".join(rng.sample(vocabulary, RANDOM_WORDS))
        out.append(
            {"kind": "random", "doc_id": rng.choice(sorted(texts)), "answer": answer, "at": None}
        )
    return out


def testset(items: list[dict]) -> pa.Table:
    """The answers as an AutoRAG test set: one question each, its answer and document."""
    rows = [
        {
            "question": f"question {n}",
            "correct_answers": [item["answer"]],
            "correct_answer_document_ids": [item["doc_id"]],
        }
        for n, item in enumerate(items)
    ]
    return pa.Table.from_pylist(_as_testset(rows), schema=TESTSET)


def _as_testset(rows: list[dict]) -> list[dict]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "answers.json"
        path.write_text(json.dumps(rows), encoding="utf-8")
        return load_testset(str(path)).to_pylist()


def documents(texts: dict[str, str]) -> pa.Table:
    ids = sorted(texts)
    return pa.table(
        {
            "doc_id": ids,
            "source": ids,
            "format": [Path(i).suffix.lstrip(".") for i in ids],
            "text": [texts[i] for i in ids],
        }
    )


def measure() -> dict:
    """Per kind: answers, located (a gold span), right (located and overlapping what the
    answer restates), approximate (of the located); and the seconds resolve_testset took."""
    texts = corpus()
    items = answers(texts)
    table = testset(items)
    started = time.perf_counter()
    resolved = resolve_testset(table, documents(texts))
    seconds = time.perf_counter() - started
    figures: dict = {}
    for item, spans in zip(items, resolved["gold_spans"].to_pylist(), strict=True):
        kind = figures.setdefault(
            item["kind"], dict.fromkeys(["answers", "located", "right", "approximate"], 0)
        )
        kind["answers"] += 1
        if spans:
            kind["located"] += 1
            kind["approximate"] += any(s["found"] == "approximate" for s in spans)
            kind["right"] += item["at"] is not None and any(
                s["doc_id"] == item["doc_id"]
                and s["start"] < item["at"][1]
                and item["at"][0] < s["end"]
                for s in spans
            )
    return {
        "kinds": figures,
        "seconds": seconds,
        "documents": len(texts),
        "bytes": sum(map(len, texts.values())),
    }


def examples() -> dict:
    """The example AutoRAG test set (answers written by hand) resolved against examples/docs:
    its questions, those with a gold span, the approximate spans and how many overlap the
    same question's reference context in the Giskard file (the place known), and seconds."""
    docs = read_documents(str(EXAMPLES / "docs")).table
    table = load_testset(str(EXAMPLES / "testset.json"))
    started = time.perf_counter()
    autorag = resolve_testset(table, docs).to_pylist()
    seconds = time.perf_counter() - started
    giskard = resolve_testset(load_testset(str(EXAMPLES / "testset.jsonl")), docs).to_pylist()
    approximate = right = 0
    for row, truth in zip(autorag, giskard, strict=True):
        for span in row["gold_spans"]:
            if span["found"] == "approximate":
                approximate += 1
                right += any(
                    t["doc_id"] == span["doc_id"]
                    and span["start"] < t["end"]
                    and t["start"] < span["end"]
                    for t in truth["gold_spans"]
                )
    located = sum(bool(row["gold_spans"]) for row in autorag)
    return {
        "questions": len(autorag),
        "located": located,
        "approximate": approximate,
        "right": right,
        "seconds": seconds,
    }


def time_large(size_mb: float) -> tuple[int, int, float]:
    """(bytes, answers, seconds): the example documents repeated with numbered sentences
    to ``size_mb`` megabytes in one document, and 200 reworded answers located in it."""
    texts = corpus()
    rng = random.Random(SEED)
    pieces = [s for t in texts.values() for s in sentences(t)]
    body, n = [], 0
    while sum(map(len, body)) < size_mb * 1_000_000:
        body.append(f"{pieces[n % len(pieces)]} (section {n})")
        n += 1
    text = "\n\n".join(body)
    chosen = rng.sample(body, 200)
    rows = [
        {
            "question": f"q{i}",
            "correct_answers": [reword(s, rng)],
            "correct_answer_document_ids": ["big.md"],
        }
        for i, s in enumerate(chosen)
    ]
    table = pa.Table.from_pylist(_as_testset(rows), schema=TESTSET)
    started = time.perf_counter()
    resolve_testset(table, documents({"big.md": text}))
    return len(text), len(rows), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--size-mb", type=float, default=0, help="also time one document this large"
    )
    args = parser.parse_args()
    result = measure()
    print(
        f"{result['documents']} documents, {result['bytes']:,} characters; "
        f"{result['seconds']:.2f} s to resolve and locate"
    )
    for kind, f in result["kinds"].items():
        located = f["located"] / f["answers"]
        right = f["right"] / f["located"] if f["located"] else 0.0
        print(
            f"{kind:<12} {f['answers']:>4} answers  located {f['located']:>4} ({located:.1%})"
            f"  overlapping the right sentence {f['right']:>4} ({right:.1%} of located)"
            f"  approximate {f['approximate']}"
        )
    ex = examples()
    print(
        f"examples/testset.json: {ex['located']} of {ex['questions']} questions with a gold span; "
        f"{ex['right']} of {ex['approximate']} approximate spans overlap the Giskard reference "
        f"context; {ex['seconds']:.2f} s to resolve and locate"
    )
    if args.size_mb:
        size, count, seconds = time_large(args.size_mb)
        print(
            f"one document of {size:,} characters: {count} reworded answers, "
            f"{seconds:.2f} s to resolve and locate"
        )


if __name__ == "__main__":
    main()

"""Every prompt ragsweep sends to a model, in one place, so a run can record what it asked.

The answer prompts are defaults: a run may set its own system prompt and template (the
template's ``{context}`` and ``{question}`` are filled in; nothing else in it is special).
Standalone (constants only): this file is also copied beside a pattern's scripts.
"""

ANSWER_SYSTEM_PROMPT = (
    "You answer questions about a product's documentation. Use only the context you are "
    "given. Answer briefly and precisely. If the context does not contain the answer, say "
    "that you cannot answer from the documentation."
)

ANSWER_TEMPLATE = "Context:\n{context}\n\nQuestion: {question}\n\nAnswer:"

JUDGE_SYSTEM_PROMPT = """You grade the answers of a question-answering assistant.

You are given a question, one or more reference answers, and the assistant's answer. Decide
whether the answer is correct with respect to the references:
- Correct: it states what a reference states, in any wording (semantic equivalence), and it
  contains no statement that contradicts the references. Extra detail that does not
  contradict them is fine.
- Incorrect: it contradicts a reference, misses the information the question asks for, is
  about something else, or says it cannot answer (unless the reference itself says that the
  question cannot be answered).
- Out of scope: when the question is marked out of scope, the documentation does not hold
  its answer. Then the answer is correct only if it declines to answer (says it cannot
  answer, or that the documentation does not say); an answer that gives facts anyway is
  incorrect, whatever the references say.

Reply with one JSON object and nothing else:
{"correctness": true or false, "correctness_reason": "one sentence saying why"}"""

JUDGE_TEMPLATE = """Question:
{question}

Reference answer(s):
{references}

Assistant's answer:
{answer}"""

JUDGE_OUT_OF_SCOPE = """

This question is out of scope: the documentation does not hold its answer."""
"""Appended to the judge's user message for an out-of-scope question."""

JUDGE_CORRECTION = (
    "Your reply could not be read: {problem}. Reply again with only one JSON object: "
    '{{"correctness": true or false, "correctness_reason": "one sentence"}}'
)
# the last corrective request: stricter, with an example of the whole reply
JUDGE_STRICT = (
    "Your reply still could not be read: {problem}. Your whole reply must be exactly one "
    "line of JSON and nothing else: no prose, no code fence, no other keys. For example:\n"
    '{{"correctness": false, "correctness_reason": "The answer gives the wrong year."}}'
)

# Query transformations (ragsweep.retrieval.queries): HyDE embeds a passage the model writes
# in place of the question; multi-query searches with paraphrases too and fuses the rankings.
HYDE_SYSTEM_PROMPT = (
    "You write the passage of a product's documentation that answers a question. Write one "
    "short paragraph, as the documentation would state it, and nothing else."
)
MULTI_QUERY_SYSTEM_PROMPT = (
    "You rewrite a question about a product's documentation in other words, to search the "
    "documentation with. Write exactly {n} rewritings, one a line, with no numbering and "
    "nothing else."
)

# AutoRAG's answer_relevance (ai4rag's LLM-as-a-judge evaluator): does the answer address the
# question, on a 1-5 scale; the judge sees the question and the answer, not the references
RELEVANCE_PROMPT = """You rate how well an assistant's answer addresses the user's question:
whether it answers it directly and helpfully and stays on topic.

Question: {question}

Answer: {answer}

Scores: 1 = does not address the question at all; 2 = mostly fails, with some relevant
parts; 3 = partly addresses it; 4 = mostly addresses it, with minor gaps; 5 = fully
addresses it.
Reply with only a JSON object: {{"score": <1 to 5>, "rationale": "<one sentence>"}}"""

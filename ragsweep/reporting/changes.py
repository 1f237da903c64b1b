"""What changed between two runs of a sweep, from their recorded settings: the documents
(added, removed, edited, by id), the test set, the grid, the embedding models' runtimes and
identities, and the other settings that change what is measured. A nightly sweep over a
growing corpus keeps its baseline (it follows the sweep's name), and its comparison says
what it is being compared across."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SHOWN = 10  # ids listed per kind of change; the count is always given
# settings that change what is measured, besides the documents, the test set and the grid
MEASURED = ("optimization_metric", "max_document_bytes", "max_questions", "seed")
MEASURED += ("max_llm_calls", "llm", "qa_generation")
MEASURED += ("agents",)  # the deployed assistants' names (--agent)


@dataclass(frozen=True)
class Changes:
    """What differs between the baseline's settings and the candidate's."""

    documents_known: bool  # both runs recorded each document's hash
    documents_added: list[str] = field(default_factory=list)
    documents_removed: list[str] = field(default_factory=list)
    documents_edited: list[str] = field(default_factory=list)  # same id, other text
    documents: tuple[int, int] = (0, 0)  # how many each run had (baseline, candidate)
    testset: tuple[str, str] = ("", "")  # content fingerprints, when they differ
    grid: list[str] = field(default_factory=list)  # "top_ks: [1, 3] -> [1, 3, 5]"
    settings: list[str] = field(default_factory=list)  # likewise, the other MEASURED
    models: list[str] = field(default_factory=list)  # "m: runtime torch -> onnx"

    @property
    def documents_changed(self) -> bool:
        return bool(self.documents_added or self.documents_removed or self.documents_edited)

    def counts(self) -> dict[str, int]:
        """The changes as the compare step logs them; the documents' only when both runs
        recorded their hashes."""
        out = {"testset_changed": int(bool(self.testset[0])), "grid_changed": int(bool(self.grid))}
        out["embedding_models_changed"] = len(self.models)
        if self.documents_known:
            out["documents_added"] = len(self.documents_added)
            out["documents_removed"] = len(self.documents_removed)
            out["documents_edited"] = len(self.documents_edited)
        return out


def changes(before: dict[str, Any], after: dict[str, Any]) -> Changes:
    """The changes from the run whose settings are ``before`` to the one of ``after``
    (``RunSettings.record``); documents are compared by id and content hash when both runs
    recorded them (runs stored before ``document_hashes`` did not)."""
    old, new = before.get("document_hashes"), after.get("document_hashes")
    known = old is not None and new is not None
    old, new = dict(old or []), dict(new or [])
    testsets = before.get("testset_content"), after.get("testset_content")
    return Changes(
        documents_known=known,
        documents_added=sorted(set(new) - set(old)),
        documents_removed=sorted(set(old) - set(new)),
        documents_edited=sorted(d for d in set(old) & set(new) if old[d] != new[d]),
        documents=(len(old), len(new)),
        testset=testsets if testsets[0] != testsets[1] and all(testsets) else ("", ""),
        grid=_differences(before.get("search_space") or {}, after.get("search_space") or {}),
        settings=_differences(
            {k: before.get(k) for k in MEASURED}, {k: after.get(k) for k in MEASURED}
        ),
        models=_model_changes(before, after),
    )


def _model_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Each embedding model of the candidate whose runtime or identity (its files, or its
    endpoint) differs from the baseline's (``RunSettings.embedding_record``); a baseline made
    before ragsweep recorded them shows ``not recorded``. A model new to the grid is the
    grid's change, not listed here."""
    runtimes = [dict(r.get("embedding_runtimes") or []) for r in (before, after)]
    identities = [dict(r.get("embedding_identities") or []) for r in (before, after)]
    out = []
    for model in sorted(runtimes[1]):
        if runtimes[0] and model not in runtimes[0]:
            continue
        old, new = runtimes[0].get(model, "not recorded"), runtimes[1][model]
        was, now = identities[0].get(model, "not recorded"), identities[1].get(model)
        if old != new:
            out.append(f"{model}: runtime {old} -> {new}")
        elif was != now:
            out.append(f"{model}: identity {was} -> {now} (its files or its endpoint changed)")
    return out


def _differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    def shown(value: Any) -> str:
        return "-" if value is None else json.dumps(value, sort_keys=True)

    return [
        f"{key}: {shown(before.get(key))} -> {shown(after.get(key))}"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


def lines(found: Changes) -> list[str]:
    """The changes as lines for the terminal and Markdown: the documents always (or that
    they cannot be told), the rest when changed."""

    def some(items: list[str]) -> str:
        more = f", ... {len(items) - SHOWN} more" if len(items) > SHOWN else ""
        return f": {', '.join(items[:SHOWN])}{more}" if items else ""

    if not found.documents_known:
        out = ["documents: not compared (a run made before ragsweep kept each document's hash)"]
    elif not found.documents_changed:
        out = [f"documents: unchanged ({found.documents[1]})"]
    else:
        kinds = {
            "added": found.documents_added,
            "removed": found.documents_removed,
            "edited": found.documents_edited,
        }
        before, after = found.documents
        counted = ", ".join(f"{len(ids)} {what}" for what, ids in kinds.items())
        out = [f"documents: {before} -> {after} ({counted})"]
        out += [f"documents {what} ({len(ids)}){some(ids)}" for what, ids in kinds.items() if ids]
    if found.testset[0]:
        old, new = (f[:8] for f in found.testset)
        out.append(f"test set: changed (content {old} -> {new}); its questions below")
    out += [f"grid: {g}" for g in found.grid]
    out += [f"setting: {s}" for s in found.settings]
    out += [f"embedding model {m}" for m in found.models]
    return out

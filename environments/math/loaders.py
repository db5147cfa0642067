"""GSM8K test and MATH-500 as gymflow tasks, with the sources' own ids.

Both files are copied unchanged into ``data/`` (see ``data/PROVENANCE.md``). They are
evaluation sets: the loaders give them the split ``heldout`` and
:meth:`~gymflow.environments.math.environment.MathEnvironment.generate` never mixes them into
training tasks.
The same row readers are the ``gsm8k`` and ``math500`` task formats of ``gymflow verify``.

Ground truth (what the verifier and the gold text need): ``answer`` (LaTeX, compared with
math-verify), ``solution`` (the source's worked solution), ``source``, ``level``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from gymflow.core.task_record import Task, content_hash
from gymflow.environments.math.extract import last_boxed

DATA = Path(__file__).parent / "data"
FILES = {"gsm8k": "gsm8k_test.jsonl", "math500": "math500_test.jsonl"}
GENERATORS = {
    "gsm8k": "openai/grade-school-math@3101c7d5:grade_school_math/data/test.jsonl",
    "math500": "openai/prm800k MATH-500 via jincan333/MAS-TTS@ae8f9618:data/math500/test.jsonl",
}
INSTRUCTION = "Put the final answer in \\boxed{}."
_CALCULATOR = re.compile(r"<<[^<>]*>>")
"""GSM8K's calculator annotations (``<<16-3-4=9>>``), not meant for the reader."""


def prompt_for(question: str) -> list[dict]:
    """The one user message every math task asks with."""
    return [{"role": "user", "content": f"{question}\n\n{INSTRUCTION}"}]


def source_rows(source: str) -> Iterator[dict]:
    """The rows of one copied source file, as they are."""
    with (DATA / FILES[source]).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


@cache
def source_tasks(source: str) -> tuple[Task, ...]:
    """Every task of ``source`` (``gsm8k``: 1319, ``math500``: 500), in file order."""
    reader = IMPORTERS[source]
    return tuple(reader(row) for row in source_rows(source))


def gsm8k_task(row: dict) -> Task:
    """A GSM8K row (``id``, ``question``, ``answer`` ending ``#### N``, ``final_answer``)."""
    answer = str(row["final_answer"]).strip()
    if not answer:
        raise ValueError("final_answer is empty")
    worked = _CALCULATOR.sub("", str(row["answer"])).rsplit("####", 1)[0].strip()
    truth = {
        "answer": answer,
        "solution": f"{worked}\nThe answer is \\boxed{{{answer}}}.",
        "source": "gsm8k",
    }
    return _task(str(row["id"]), str(row["question"]), truth, "gsm8k")


def math500_task(row: dict) -> Task:
    """A MATH-500 row (``id``, ``problem``, ``solution`` with ``\\boxed{}``, ``answer``, ...)."""
    answer = str(row["answer"]).strip()
    if not answer:
        raise ValueError("answer is empty")
    solution = str(row["solution"]).strip()
    if (last_boxed(solution) or "").strip() != answer:  # true for all 500; kept for new rows
        solution += f"\n\nThe final answer is $\\boxed{{{answer}}}$."
    truth = {
        "answer": answer,
        "solution": solution,
        "source": "math500",
        "level": int(row["level"]),
        "subject": str(row["subject"]),
    }
    return _task(str(row["id"]), str(row["problem"]), truth, "math500")


def _task(task_id: str, question: str, truth: dict, source: str) -> Task:
    prompt = prompt_for(question)
    return Task(
        task_id=task_id,
        env="math",
        split="heldout",
        prompt=prompt,
        tools=[],
        ground_truth=truth,
        generator=GENERATORS[source],
        seed=0,
        content_hash=content_hash(prompt, truth),
    )


IMPORTERS = {"gsm8k": gsm8k_task, "math500": math500_task}

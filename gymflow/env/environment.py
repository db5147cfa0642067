"""The base every environment subclasses: tools, a task generator, a pure verifier, probes.

An environment is a class with

* ``tools()`` — typed callables (see :mod:`gymflow.env.tool_schema`); one that takes a ``session``
  argument gets the session's state, so tools may read and change per-session resources;
* ``generate(n, seed)`` — deterministic task drafts ``(prompt, ground_truth)``;
* ``verify(task, items)`` — the pure scoring function wrapped by the server's ``/verify``;
* ``gold_text(task)`` — what a perfect policy writes (demonstrations, profiling, self-check);
  ``gold_turns(task)`` the same turn by turn for a multi-turn episode (the SFT stage plays it
  through the server and trains on each turn with the real tool outputs before it);
* ``probes(task)`` — adversarial answers with the highest reward each may get;
* ``well_formed(score, items)`` — whether an episode's answer has the environment's format
  (whatever its correctness): the baseline's rate of it decides whether SFT runs first
  (``sft.run = "auto"``), evaluation reports it and the gate refuses a candidate that loses it;
* ``importers()`` — optional external task formats for ``gymflow verify --format``.

The resources server (:mod:`gymflow.env.resources_server`) serves any subclass over ASGI.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.task_record import Split, Task
from gymflow.env.tool_schema import ToolSpec, tool_spec

_MALFORMED = frozenset({FailureKind.INVALID_JSON, FailureKind.NO_TOOL_CALL})
DEFAULT_FORMAT_RULE = (
    "the verifier's format component where it reports one; else no invalid_json or "
    "no_tool_call verdict, and a final reply the token budget did not cut"
)


@dataclass(frozen=True)
class TaskDraft:
    """A generated task before ids and splits are assigned."""

    prompt: list[dict]
    ground_truth: dict
    seed: int
    tools: list[dict] | None = None
    """The tools this task shows (OpenAI function schemas); None: the environment's own."""
    split: Split | None = None
    """A split the generator fixes ("heldout" for tasks on tools training must never show);
    None: drawn from the prompt's hash like every other task's."""


@dataclass(frozen=True)
class Probe:
    """An adversarial answer: ``text`` must not score above ``max_reward``."""

    name: str
    text: str
    max_reward: float


class Environment(ABC):
    name: ClassVar[str]
    version: ClassVar[str] = "1"
    max_turns: ClassVar[int] = 1
    """Model turns per episode; a single-call environment ends after the first turn."""
    reward_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    """Lowest and highest reward the verifier gives; stored rollouts are checked against it."""
    heavy_verify: ClassVar[bool] = False
    """True when ``verify`` is CPU-heavy (math-verify, running code): the resources server then
    runs it in a process pool, off the event loop, so other sessions are not stalled. The
    class must be importable (module + name) and build with no arguments in the workers."""

    blocking_tools: ClassVar[frozenset[str]] = frozenset()
    """Names of plain (sync) tools that block — sleep, disk, a subprocess, a sync client. The
    server runs them in a worker thread so other sessions' requests go on meanwhile; other sync
    tools run on the event loop (no thread hop: most tools are microseconds of Python). Async
    tools are awaited. One session's calls come one at a time from its agent loop, so a
    blocking tool may use its session's state without a lock."""

    @abstractmethod
    def tools(self) -> list[Callable[..., Any]]: ...

    @abstractmethod
    def generate(self, n: int, seed: int) -> list[TaskDraft]: ...

    @abstractmethod
    def verify(self, task: Task, items: list[dict]) -> Score: ...

    @abstractmethod
    def gold_text(self, task: Task) -> str: ...

    def gold_turns(self, task: Task) -> list[str]:
        """A perfect episode's texts turn by turn; one turn (``gold_text``) by default."""
        return [self.gold_text(task)]

    def probes(self, task: Task) -> list[Probe]:
        return []

    def well_formed(self, score: dict, items: list[dict]) -> bool:
        """Whether an episode's answer has this environment's format, right or wrong.

        ``score`` is the verifier's verdict as the rollout stores it (``failure_kind``,
        ``components``; ``verdict_kind`` is the verifier's own kind when the token budget cut
        the episode), ``items`` the episode's trajectory. The default rule, in order:

        * the verifier reports a ``format`` component: it is 1.0;
        * the answer is malformed tool-call markup or calls no tool where one is needed
          (``invalid_json`` or ``no_tool_call``, the verifier's kind or its verdict under a cut);
        * the token budget cut the final reply (``truncated`` with an assistant message last):
          an answer that never ended is not well formed, whatever its text;
        * else well formed.

        Override it to say what a well-formed answer is for your task (one line of digits, a
        word of letters, a JSON object of a schema); keep it independent of correctness, so a
        wrong answer in the right format counts. The first line of its docstring is quoted in
        run reports as the environment's format check.

        >>> from gymflow.environments.math import MathEnvironment
        >>> env = MathEnvironment()
        >>> env.well_formed({"failure_kind": "wrong_answer", "components": {}}, [])
        True
        >>> cut = [{"type": "message", "role": "assistant", "content": "7 + 7 + 7 +"}]
        >>> env.well_formed({"failure_kind": "truncated", "components": {}}, cut)
        False
        """
        components = score.get("components") or {}
        if "format" in components:
            return components["format"] == 1.0
        kinds = {score.get("failure_kind"), score.get("verdict_kind")}
        if kinds & _MALFORMED:
            return False
        if score.get("failure_kind") == FailureKind.TRUNCATED:
            last = items[-1] if items else {}
            return not (last.get("type") == "message" and last.get("role") == "assistant")
        return True

    def format_rule(self) -> str:
        """The format check in words, as run reports quote it: the default rule, or the first
        line of an override's docstring."""
        method = type(self).well_formed
        if method is Environment.well_formed:
            return DEFAULT_FORMAT_RULE
        doc = (method.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else f"{type(self).__name__}.well_formed"

    def check_task(self, task: Task) -> None:
        """Raise (any exception, with a message) if this environment cannot use ``task``.

        The resources server calls it at ``/seed_session`` and refuses such a task with
        ``bad_request``, so a ground truth the verifier cannot read (``{}``, a missing field)
        never reaches ``verify``. By default the gold episode is built from the ground truth,
        which reads every field a verifier compares against; override it to check more.
        """
        turns = self.gold_turns(task)
        if not turns or not all(isinstance(turn, str) for turn in turns):
            raise ValueError("its gold episode is empty")

    def invalid_trajectory_score(self, problem: str) -> Score:
        """What a trajectory that is not of the Responses shape scores: the model's fault, at
        the lowest reward that is not below 0 when the range allows (else its lowest)."""
        low, high = self.reward_range
        reward = 0.0 if low <= 0.0 <= high else low
        return Score(reward, False, FailureKind.INVALID_TRAJECTORY, {}, problem)

    def importers(self) -> dict[str, Callable[[dict], Task]]:
        """Extra task formats for ``gymflow verify --format``: name -> (JSON row -> Task).

        An importer keeps the source's own id as ``task_id`` and raises ``ValueError``,
        ``KeyError`` or ``TypeError`` on a row it cannot read. None by default.
        """
        return {}

    def new_state(self, task: Task) -> Any:
        """Per-session state handed to tools that take ``session``; none by default."""
        return None

    @cached_property
    def tool_specs(self) -> dict[str, ToolSpec]:
        return {spec.name: spec for spec in map(tool_spec, self.tools())}

    @property
    def tool_schemas(self) -> list[dict]:
        return [spec.schema for spec in self.tool_specs.values()]


def examples_folder(env: Environment) -> Path:
    """The ``examples/`` folder beside the module that defines the environment's class (its
    ``tasks.jsonl`` and ``rollouts.jsonl``, :mod:`gymflow.rollout.examples`)."""
    return Path(sys.modules[type(env).__module__].__file__).resolve().parent / "examples"

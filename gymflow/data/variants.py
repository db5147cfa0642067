"""LLM-written variants of seed tasks: the request to a teacher, its reply as candidate tasks,
and the near-duplicate filter. No model and no server here (see
:mod:`gymflow.rollout.task_variants` for asking the teacher and checking gold answers).

A teacher is asked, per seed task, for ``n`` variants in one JSON object::

    {"variants": [{"kind": "paraphrase", "prompt": "..."},
                  {"kind": "scenario", "prompt": "...", "ground_truth": {...}}]}

* a **paraphrase** asks the same thing in other words and keeps the seed's ground truth; it
  must keep the seed's numbers (the same multiset of digit runs), since a changed number makes
  the seed's gold answer wrong in a way no verifier sees (``facts_changed``);
* a **scenario** is a new request of the same kind with its own ground truth, which must hold
  every field of the seed's (the environment's ground-truth shape).

Each requested variant ends with one verdict, the first that applies: ``unparseable`` (the
reply is not that JSON, the element is malformed, or the reply held fewer than ``n``
elements: each missing one counts), ``facts_changed``, ``gold_rejected`` (the environment
refuses the ground truth or its gold answer scores under 1.0), ``near_duplicate`` (the prompt
repeats or nearly repeats a seed, any task of the run, a held-out prompt recorded elsewhere,
or a variant kept before it), else ``kept``. Elements past the ``n`` th are ignored.

What the checks do not cover: a scenario whose prompt does not match its own ground truth
(the verifier checks the gold answer against the ground truth, never the prompt), and a
paraphrase that changes a fact that is not a number (a city, a name).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from gymflow.core.task_record import Task, content_hash
from gymflow.core.tool_calls import strict_json
from gymflow.data.dedup import NearDupSettings, PromptIndex, normalized_prompt
from gymflow.data.leakage import PromptRef

VARIANT_SOURCE = "llm_variant"
"""The ``source`` field of a kept variant's ground truth (the coverage report's source facet)."""
KINDS = ("paraphrase", "scenario")
VERDICTS = ("kept", "unparseable", "facts_changed", "gold_rejected", "near_duplicate")
LINEAGE_FIELDS = ("source", "variant")
"""Ground-truth fields a variant's lineage sets (never shown to the teacher as task content)."""
MAX_PROMPT_CHARS = 8000
_NUMBER = re.compile(r"\d+")
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")

INSTRUCTIONS = """\
You write new training tasks for the environment "{env}". A task is the user's request \
(the prompt) and a ground truth: the JSON object the environment's verifier checks answers \
against.

Write {n} variants of the seed task below. Allowed kinds: {kinds}.
- "paraphrase": the same request in other words. Keep every fact, name and number, so the \
seed's ground truth still holds. Do not copy the seed's wording.
- "scenario": a different request of the same kind, with its own ground truth: a JSON object \
with exactly the seed's fields, filled in correctly for your request.
Keep any instruction about the answer's format word for word.

Reply with one JSON object and nothing else:
{{"variants": [{{"kind": "paraphrase", "prompt": "..."}}, \
{{"kind": "scenario", "prompt": "...", "ground_truth": {{...}}}}]}}"""


def variant_request(env_name: str, seed: Task, n: int, kinds: Sequence[str] = KINDS) -> list[dict]:
    """Chat messages asking a teacher for ``n`` variants of ``seed`` (see the module doc)."""
    truth = {k: v for k, v in seed.ground_truth.items() if k not in LINEAGE_FIELDS}
    system = INSTRUCTIONS.format(env=env_name, n=n, kinds=", ".join(f'"{k}"' for k in kinds))
    user = (
        f"Seed prompt:\n{_request_text(seed)}\n\n"
        f"Seed ground truth:\n{json.dumps(truth, ensure_ascii=False)}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass
class Candidate:
    """One requested variant of a seed: its task when it parsed, and its verdict so far."""

    seed: Task
    index: int
    kind: str = ""
    task: Task | None = None
    verdict: str = "kept"
    detail: str = ""

    def reject(self, verdict: str, detail: str) -> None:
        self.verdict, self.detail = verdict, detail

    def row(self) -> dict:
        """What a person reads in ``variants.jsonl``."""
        return {
            "seed_task_id": self.seed.task_id,
            "index": self.index,
            "kind": self.kind,
            "verdict": self.verdict,
            "detail": self.detail,
            "task_id": self.task.task_id if self.task else None,
            "prompt": _request_text(self.task) if self.task else None,
            "ground_truth": self.task.ground_truth if self.task else None,
        }


def parse_reply(
    text: str, seed: Task, n: int, teacher: str, kinds: Sequence[str] = KINDS
) -> list[Candidate]:
    """The teacher's reply for ``seed`` as exactly ``n`` candidates, each a task or unparseable;
    a paraphrase that changed the seed's numbers is ``facts_changed``."""
    candidates = [Candidate(seed, i) for i in range(n)]
    try:
        variants = _variants(text)
    except ValueError as exc:
        for c in candidates:
            c.reject("unparseable", f"the reply is not a variants object: {exc}")
        return candidates
    for c in candidates[len(variants) :]:
        c.reject("unparseable", f"the reply held {len(variants)} of the {n} variants asked")
    for c, raw in zip(candidates, variants, strict=False):
        try:
            c.kind, prompt_text, truth = _variant(raw, seed, kinds)
        except ValueError as exc:
            c.reject("unparseable", str(exc))
            continue
        c.task = variant_task(seed, c.kind, prompt_text, truth, teacher)
        if c.kind == "paraphrase" and _numbers(prompt_text) != _numbers(_request_text(seed)):
            c.reject(
                "facts_changed",
                f"the paraphrase's numbers {sorted(_numbers(prompt_text).elements())} are not "
                f"the seed's {sorted(_numbers(_request_text(seed)).elements())}",
            )
    return candidates


def variant_task(seed: Task, kind: str, text: str, truth: dict, teacher: str) -> Task:
    """A train task: ``seed``'s prompt with its last user message replaced by ``text``, and
    ``truth`` with the variant's lineage (``source``, ``variant``: of, kind, teacher)."""
    last = max((i for i, m in enumerate(seed.prompt) if m.get("role") == "user"), default=None)
    prompt = [dict(m) for m in seed.prompt]
    if last is None:
        prompt.append({"role": "user", "content": text})
    else:
        prompt[last] = {**prompt[last], "content": text}
    lineage = {"of": seed.task_id, "kind": kind, "teacher": teacher}
    truth = {**truth, "source": VARIANT_SOURCE, "variant": lineage}
    digest = content_hash(prompt, truth)
    return Task(
        task_id=f"{seed.env}-variant-{digest[:12]}",
        env=seed.env,
        split="train",
        prompt=prompt,
        tools=seed.tools,
        ground_truth=truth,
        generator=f"{VARIANT_SOURCE}:{teacher}",
        seed=seed.seed,
        content_hash=digest,
    )


def drop_near_duplicates(
    candidates: Sequence[Candidate], existing: Sequence[PromptRef], settings: NearDupSettings
) -> None:
    """Mark each still-kept candidate ``near_duplicate`` when its prompt is (nearly) one of
    ``existing`` or of a candidate kept before it, naming what it repeats."""
    index = PromptIndex(settings)
    origins = {f"existing:{i}": ref for i, ref in enumerate(existing)}
    index.insert((key, ref.text) for key, ref in origins.items())
    for c in candidates:
        if c.verdict != "kept" or c.task is None:
            continue
        text = normalized_prompt(c.task.prompt)
        matches = index.query([text])[0]
        if matches:
            ref, similarity = origins[matches[0].key], matches[0].similarity
            c.reject("near_duplicate", f"{similarity:.2f} like {ref.id} ({ref.origin})")
            continue
        origins[c.task.task_id] = PromptRef(c.task.task_id, text, "variant kept earlier")
        index.insert([(c.task.task_id, text)])


@dataclass
class VariantReport:
    """What the teacher wrote and what became of it."""

    candidates: list[Candidate] = field(default_factory=list)

    @property
    def kept(self) -> list[Task]:
        return [c.task for c in self.candidates if c.verdict == "kept" and c.task is not None]

    def counts(self) -> dict[str, int]:
        """``asked`` and one count per verdict (they add up to ``asked``)."""
        seen = Counter(c.verdict for c in self.candidates)
        return {"asked": len(self.candidates), **{v: seen[v] for v in VERDICTS}}


def _request_text(task: Task) -> str:
    return "\n".join(str(m.get("content") or "") for m in task.prompt if m.get("role") == "user")


def _numbers(text: str) -> Counter:
    return Counter(_NUMBER.findall(text))


def _variants(text: str) -> list:
    """The ``variants`` list of a reply: the whole text (a code fence around it is fine), else
    the part from its first ``{`` to its last ``}`` (a teacher that wrote a sentence around it)."""
    body = _FENCE.sub("", text.strip())
    try:
        obj = _strict(body)
    except ValueError:
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end < start or (start, end) == (0, len(body) - 1):
            raise
        obj = _strict(body[start : end + 1])
    if not isinstance(obj, dict) or not isinstance(obj.get("variants"), list):
        raise ValueError('expected {"variants": [...]}')
    return obj["variants"]


def _variant(raw: object, seed: Task, kinds: Sequence[str]) -> tuple[str, str, dict]:
    """``(kind, prompt text, ground truth)`` of one element; ``ValueError`` says what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError("a variant is not an object")
    kind, text = raw.get("kind"), raw.get("prompt")
    if kind not in kinds:
        raise ValueError(f"kind {kind!r} is not one of {list(kinds)}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the variant has no prompt text")
    if len(text) > MAX_PROMPT_CHARS:
        raise ValueError(f"the prompt is over {MAX_PROMPT_CHARS} characters")
    seed_truth = {k: v for k, v in seed.ground_truth.items() if k not in LINEAGE_FIELDS}
    if kind == "paraphrase":
        return kind, text.strip(), seed_truth
    truth = raw.get("ground_truth")
    if not isinstance(truth, dict):
        raise ValueError("a scenario needs a ground_truth object")
    if missing := sorted(set(seed_truth) - set(truth)):
        raise ValueError(f"the scenario's ground truth lacks the seed's fields {missing}")
    return kind, text.strip(), {k: v for k, v in truth.items() if k not in LINEAGE_FIELDS}


def _strict(body: str) -> object:
    try:
        return strict_json(body)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None

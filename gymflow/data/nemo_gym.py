"""NeMo Gym interop: its task rows (``responses_create_params`` + verifier fields) and rollouts.

NeMo Gym stores a task as one JSON row whose ``responses_create_params`` holds the OpenAI
Responses request (``input`` messages, ``tools`` as Responses function tools) next to the
fields its verifier reads (``expected_count``, ``ground_truth``, …). Environments that import
NeMo Gym tasks read the request part with :func:`nemo_prompt` (or build the whole task with
:func:`nemo_task`) and their own verifier fields.

A NeMo Gym *rollout* row is its ``/verify`` response: the ``responses_create_params`` echoed,
the OpenAI ``response`` object (``output``: ``function_call`` / ``function_call_output`` /
``message`` items), ``reward`` and the verifier's fields. :func:`rollout_row` writes a gymflow
episode in that shape (every key NeMo Gym's own rollouts carry, unknown values null), so NeMo
Gym tooling reads our rollouts; :func:`parse_rollout_row` reads any such row back into gymflow
items, which is how ``gymflow verify --responses`` scores NeMo Gym rollouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind
from gymflow.core.jsonl import InputFileError, read_jsonl
from gymflow.core.task_record import Task, content_hash
from gymflow.env.environment import Environment
from gymflow.env.items import ItemError, normalize_items


def nemo_prompt(row: dict) -> tuple[list[dict], list[dict]]:
    """``(messages, tools)`` of a NeMo Gym task row, as gymflow's ``Task.prompt`` / ``tools``.

    Messages keep ``role`` and text ``content``; tools become OpenAI chat function schemas
    (``{"type": "function", "function": {name, description, parameters}}``) as ``GET /tools``
    serves them. Raises ``KeyError`` / ``TypeError`` / ``ValueError`` on rows it cannot read.
    """
    params = row["responses_create_params"]
    raw_input = params["input"]
    if isinstance(raw_input, str):
        raw_input = [{"role": "user", "content": raw_input}]
    messages = []
    for item in raw_input:
        content = item["content"]
        if isinstance(content, list):  # Responses content parts: keep the text ones
            content = "".join(part.get("text", "") for part in content)
        if not isinstance(content, str):
            raise TypeError(f"message content must be text, got {type(content).__name__}")
        messages.append({"role": item["role"], "content": content})
    tools = []
    for tool in params.get("tools") or []:
        if tool.get("type", "function") != "function":
            raise ValueError(f"only function tools are supported, got {tool.get('type')!r}")
        fn = tool.get("function", tool)  # Responses tools are flat; chat tools nest "function"
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": fn["name"],
                    "description": fn.get("description", ""),
                    "parameters": fn.get("parameters", {"type": "object", "properties": {}}),
                },
            }
        )
    return messages, tools


def nemo_task(row: dict, env: Environment, ground_truth: dict, task_id: str | None = None) -> Task:
    """A held-out :class:`Task` from a NeMo Gym row and the verifier fields the caller read.

    NeMo Gym rows usually carry no id; then ``task_id`` is ``<env>-<content hash[:12]>``, the
    scheme :func:`gymflow.data.task_set.build_tasks` uses, so the same row always gets the same id.
    The row's own tools are kept; every one must be a tool of ``env`` (else ``ValueError``).
    """
    messages, tools = nemo_prompt(row)
    missing = sorted({t["function"]["name"] for t in tools} - set(env.tool_specs))
    if missing:
        raise ValueError(f"the row offers tools {env.name!r} does not have: {', '.join(missing)}")
    digest = content_hash(messages, ground_truth)
    return Task(
        task_id=task_id or f"{env.name}-{digest[:12]}",
        env=env.name,
        split="heldout",  # imported to evaluate or check a verifier, never to train on
        prompt=messages,
        tools=tools or env.tool_schemas,
        ground_truth=ground_truth,
        generator="nemo_gym",
        seed=0,
        content_hash=digest,
    )


# --- writing rollouts -------------------------------------------------------------------------


# --- reading rollouts -------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutRow:
    """A NeMo Gym rollout read back: gymflow items of its ``response.output`` (no prompt)."""

    line: int
    task_id: str | None
    """gymflow's ``task_id`` when the row has one (NeMo Gym's own rows do not)."""
    prompt: list[dict] | None
    """The ``responses_create_params`` input as chat messages, to find the task by."""
    items: list[dict]
    reward: float | None
    """The reward the producer gave, to compare with a re-score."""


def is_rollout_row(row: dict) -> bool:
    """A NeMo Gym rollout carries the Response object under ``response`` (an object, not text)."""
    return isinstance(row.get("response"), dict)


def parse_rollout_row(row: dict, line: int = 0) -> RolloutRow:
    """Read one NeMo Gym rollout row; ``ValueError`` / ``KeyError`` / ``TypeError`` if malformed.

    The items are read by :func:`gymflow.env.items.normalize_items`, as ``/verify`` reads
    them: a message's content parts are joined into text, an assistant message whose text is
    broken gymflow tool-call markup gets ``parse_error`` back, as when it was produced (NeMo
    Gym models put calls in ``function_call`` items, so their text never has the marker), and
    item types no verifier scores (``reasoning``) are left out.
    """
    response = row["response"]
    if not isinstance(response, dict):
        raise TypeError("'response' must be a Responses object")
    output = response["output"]
    task_id = row.get("task_id")
    if task_id is not None and not isinstance(task_id, str):
        raise TypeError("'task_id' must be a string")
    prompt = nemo_prompt(row)[0] if "responses_create_params" in row else None
    reward = row.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise TypeError("'reward' must be a number")
    try:
        items = normalize_items(output, "response.output")
    except ItemError as exc:
        raise ValueError(str(exc)) from None
    return RolloutRow(line, task_id, prompt, items, None if reward is None else float(reward))


def read_rollout_rows(path: Path | str) -> list[RolloutRow]:
    """Every row of a NeMo Gym rollout JSONL file; a bad row raises naming its line."""
    rows = []
    for number, row in read_jsonl(Path(path)):
        try:
            rows.append(parse_rollout_row(row, number))
        except (ValueError, KeyError, TypeError) as exc:
            problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise InputFileError(
                path, number, f"not a NeMo Gym rollout: {problem}", FailureKind.SCHEMA_VIOLATION
            ) from None
    return rows


# --- item conversion --------------------------------------------------------------------------

CREATE_PARAM_KEYS = (  # noqa: SIM905 (a word list reads better than 30 quoted lines)
    "background include input instructions max_output_tokens max_tool_calls metadata "
    "model parallel_tool_calls previous_response_id prompt reasoning service_tier store "
    "temperature text tool_choice tools top_logprobs top_p truncation user stream"
).split()
"""The keys of the create params NeMo Gym echoes (its ``example_rollouts.jsonl``)."""

RESPONSE_KEYS = (  # noqa: SIM905 (a word list reads better than 30 quoted lines)
    "id created_at error incomplete_details instructions metadata model object output "
    "parallel_tool_calls temperature tool_choice tools top_p background max_output_tokens "
    "max_tool_calls previous_response_id prompt reasoning service_tier status text "
    "top_logprobs truncation usage user billing prompt_cache_key safety_identifier store"
).split()
"""The keys of the OpenAI Response object in NeMo Gym's rollouts."""

GYMFLOW_FIELDS = ("task_id", "env", "success", "failure_kind", "reward_components")


def responses_tool(tool: dict) -> dict:
    fn = tool.get("function", tool)
    return {
        "name": fn["name"],
        "parameters": fn.get("parameters", {"type": "object", "properties": {}}),
        "strict": False,  # gymflow validates arguments on the server, not in decoding
        "type": "function",
        "description": fn.get("description", ""),
    }


def output_item(item: dict, index: int) -> dict:
    kind = item["type"]
    if kind == "function_call":
        return {
            "arguments": item["arguments"],
            "call_id": item["call_id"],
            "name": item["name"],
            "type": "function_call",
            "id": f"fc_{item['call_id']}",
            "status": "completed",
        }
    if kind == "function_call_output":
        return {
            "call_id": item["call_id"],
            "output": item["output"],
            "type": "function_call_output",
            "id": None,
            "status": None,
        }
    if kind == "message":
        text = {"annotations": [], "text": item["content"], "type": "output_text", "logprobs": []}
        return {
            "id": f"msg_{index}",
            "content": [text],
            "role": item["role"],
            "status": "completed",
            "type": "message",
        }
    raise ValueError(f"no NeMo Gym form for a gymflow item of type {kind!r}")

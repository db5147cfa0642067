"""Episodes as chat messages, and chat messages split into (prompt, completion) strings.

Shared by the rollout exports (SFT demos and DPO pairs from collected rollouts) and the SFT
stage's demonstrations for multi-turn environments (one pair per assistant turn of a gold
episode): both need the conversation the chat template would render, cut where the model's
turn begins.
"""

from __future__ import annotations

from gymflow.core.failures import FailureKind, GymflowError


def messages_from_items(items: list[dict]) -> list[dict]:
    """Trajectory items (NeMo Gym / Responses style) after the prompt as chat messages: one
    assistant message per turn (its calls as ``tool_calls``), one ``tool`` message per output."""
    messages: list[dict] = []
    for item in items:
        kind = item["type"]
        if kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            last = messages[-1] if messages else None
            if last and last["role"] == "assistant" and last.get("tool_calls"):
                last["tool_calls"].append(call)  # calls of one turn are consecutive items
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(
                {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]}
            )
        elif kind == "message":
            messages.append({"role": item["role"], "content": item["content"]})
    return messages


def split_rendered(
    tokenizer, history: list[dict], tools: list[dict] | None, reply: list[dict]
) -> tuple[str, str]:
    """``history`` rendered with the generation prompt, and what ``reply`` adds after it.

    The completion ends at the EOS token, as the model's own turns do. Raises ``bad_request``
    when the template's generation prompt is not a prefix of the longer conversation (the
    split would be wrong).
    """
    prompt = tokenizer.apply_chat_template(
        history, tools=tools or None, add_generation_prompt=True, tokenize=False
    )
    whole = tokenizer.apply_chat_template(history + reply, tools=tools or None, tokenize=False)
    if not whole.startswith(prompt):
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{tokenizer.name_or_path}: the chat template's generation prompt is not a prefix "
            "of the rendered conversation; it cannot split prompt from completion",
        )
    completion = whole[len(prompt) :]
    eos = tokenizer.eos_token
    if eos and completion.rstrip("\n").endswith(eos):
        completion = completion.rstrip("\n")
    return prompt, completion

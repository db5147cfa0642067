"""NeMo Gym interop: its task rows (``responses_create_params`` + verifier fields) and rollouts.

NeMo Gym stores a task as one JSON row whose ``responses_create_params`` holds the OpenAI
Responses request (``input`` messages, ``tools`` as Responses function tools) next to the
fields its verifier reads (``expected_count``, ``ground_truth``, …). Environments that import
NeMo Gym tasks read the request part with :func:`nemo_prompt` and their own verifier fields.
"""

from __future__ import annotations


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

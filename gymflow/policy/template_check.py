"""Whether a tokenizer's chat template can drive gymflow, found by rendering probe conversations.

gymflow renders every prompt with the tokenizer's chat template, ends a model turn at the
tokenizer's EOS token, writes and reads tool calls as ``<tool_call>{"name": …, "arguments": …}
</tool_call>`` (:mod:`gymflow.core.tool_calls`), and appends tool results as the template writes
``tool`` messages. :func:`inspect_template` renders a probe conversation for each and either
adapts the tokenizer in memory (:mod:`gymflow.policy.checkpoints` saves it beside the weights)
or refuses it with ``unusable_checkpoint``, saying what is missing and what to do.

Refused: no chat template, or one that fails on a user turn; no EOS token; a generation prompt
that is not where the template starts the assistant turn; an assistant turn that ends in plain
text instead of a special token; a template that writes a tool call in another format (Llama
3.1's bare JSON, Mistral's ``[TOOL_CALLS]``) or cannot write a tool result.

Adapted: a template that ignores tools gets gymflow's tool preamble
(:func:`gymflow.policy.tool_template.add_tools`); an assistant turn that ends in a special token
other than the EOS (``<|eot_id|>`` where the EOS is ``<|end_of_text|>``) makes that token the EOS.

:func:`observation_text` is the text a tool result adds to the conversation, from the template.
"""

from __future__ import annotations

from dataclasses import dataclass

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.tool_calls import parse_assistant_text
from gymflow.policy.tool_template import add_tools, knows_tools

IGNORED = "the chat template leaves tools out"
PROBE_NAME = "gymflow_probe"
PROBE_ARGS = {"x": 7}
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": PROBE_NAME,
        "description": "A probe.",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
    },
}
PROBE_USER = [{"role": "user", "content": "Hello."}]
PROBE_CALL = {
    "role": "assistant",
    "content": None,  # as gymflow's own conversations have it (core.conversation)
    "tool_calls": [
        {
            "id": "call_0",
            "type": "function",
            "function": {"name": PROBE_NAME, "arguments": PROBE_ARGS},
        }
    ],
}
PROBE_REPLY = "GYMFLOW_REPLY_7"
PROBE_OUTPUTS = ("GYMFLOW_OUTPUT_1", "GYMFLOW_OUTPUT_2")
TOOL_FORMAT = '<tool_call>{"name": …, "arguments": {…}}</tool_call>'
WHERE_TEMPLATE = '"chat_template" in tokenizer_config.json or a chat_template.jinja file'


@dataclass(frozen=True)
class ObservationText:
    """What tool results add after an assistant turn's EOS: ``first`` + output, then
    ``between`` + ``first`` + output for each further result of the turn, then ``last``
    (which opens the next assistant turn)."""

    first: str
    between: str
    last: str


def inspect_template(tokenizer, where: str) -> dict[str, str]:
    """Check ``tokenizer`` (adapting it in place); what was changed, or ``unusable_checkpoint``.

    Tool calls must render as gymflow reads them even for environments without tools: a policy
    is loaded before its tasks are known, and one rule everywhere means no stage refuses late.
    """
    if not tokenizer.chat_template:
        raise unusable(
            where,
            "the tokenizer has no chat template, and gymflow renders every prompt with it: add "
            f"one that writes system, user, assistant and tool turns ({WHERE_TEMPLATE})",
        )
    if tokenizer.eos_token is None:
        raise unusable(
            where,
            "the tokenizer has no EOS token, and gymflow ends a model turn at it: set "
            '"eos_token" in tokenizer_config.json to the token that ends an assistant turn',
        )
    changes: dict[str, str] = {}
    prompt = _render_or_refuse(tokenizer, where, PROBE_USER, gen=True)
    whole = _render_or_refuse(tokenizer, where, [*PROBE_USER, _reply(PROBE_REPLY)])
    if not whole.startswith(prompt) or PROBE_REPLY not in whole[len(prompt) :]:
        raise unusable(
            where,
            "the chat template's generation prompt is not where it starts the assistant turn, "
            "so a prompt cannot be cut from its answer: make add_generation_prompt write "
            f"exactly the assistant turn's opening ({WHERE_TEMPLATE})",
        )
    after = whole[whole.index(PROBE_REPLY, len(prompt)) + len(PROBE_REPLY) :]
    end = _special_prefix(tokenizer, after)
    if end is None:
        raise unusable(
            where,
            f"the chat template ends an assistant turn with {after[:30]!r}, not with a special "
            "token, so gymflow cannot tell where a model turn stops: end it with the EOS "
            f"token {tokenizer.eos_token!r} ({WHERE_TEMPLATE})",
        )
    if end != tokenizer.eos_token:
        changes["eos_token"] = f"{tokenizer.eos_token} -> {end} (the token ending a turn)"
        tokenizer.eos_token = end
    problem = tool_problem(tokenizer)
    original = tokenizer.chat_template
    # A template that leaves tools out (or, naming no tools, fails on a call turn: a
    # ``message.content`` of None) gets gymflow's preamble, which writes both as text.
    if problem == IGNORED or (problem and not knows_tools(original)):
        tokenizer.chat_template = add_tools(original)
        wrapped = tool_problem(tokenizer)
        if wrapped is None:
            changes["chat_template"] = "tools rendered into the system prompt (tool_template)"
        else:
            tokenizer.chat_template = original
        problem = wrapped if wrapped is None or problem == IGNORED else problem
    if problem:
        raise unusable(where, problem)
    return changes


def tool_problem(tokenizer) -> str | None:
    """``None`` if tool calls and results render as gymflow needs; :data:`IGNORED` if the
    template leaves tools out; else what is wrong, as a sentence."""
    tools = [PROBE_TOOL]
    try:
        prompt = _render(tokenizer, PROBE_USER, tools, gen=True)
        whole = _render(tokenizer, [*PROBE_USER, PROBE_CALL], tools)
    except Exception as exc:  # a template is third-party code: any error means "cannot"
        return f"the chat template fails on a tool call ({_first_line(exc)}); {_fix()}"
    if PROBE_NAME not in whole:
        return IGNORED
    if not whole.startswith(prompt):
        return f"the chat template writes tools but its generation prompt is not a prefix of the assistant turn; {_fix()}"  # fmt: skip
    turn = whole[len(prompt) :]
    call = turn.split(tokenizer.eos_token)[0]
    if parse_assistant_text(call).calls != [(PROBE_NAME, PROBE_ARGS)]:
        if PROBE_NAME not in call:
            return IGNORED
        return f"the chat template writes a tool call as {call.strip()[:60]!r}; {_fix()}"
    if PROBE_NAME not in prompt:
        return IGNORED  # calls render, the tool list does not: gymflow's preamble writes both
    try:
        observation_text(tokenizer)
    except (ValueError, GymflowError) as exc:
        return f"{exc}; {_fix()}"
    return None


def observation_text(tokenizer) -> ObservationText:
    """The text around tool results, cut from the template's rendering of one and two results.

    Templates that give each result its own turn (ChatML's ``tool`` role) render exactly;
    templates that group a turn's results into one message (Qwen2.5's ``<tool_response>``
    blocks in a user turn) close the group after each result, so two results of one turn
    become two messages. Raises ``ValueError`` when the template cannot write a result.
    """
    history = [*PROBE_USER, PROBE_CALL]
    one_out, two_out = PROBE_OUTPUTS
    try:
        one = _render(tokenizer, [*history, _tool(one_out)], gen=True)
        two = _render(tokenizer, [*history, _tool(one_out), _tool(two_out)], gen=True)
        opening = _generation_prompt(tokenizer)
    except Exception as exc:  # a template is third-party code: any error means "cannot"
        raise ValueError(f"the chat template fails on a tool result ({_first_line(exc)})") from None
    eos = tokenizer.eos_token
    call_at = one.find(PROBE_NAME)
    if call_at < 0 or eos not in one[call_at:] or one.count(one_out) != 1:
        raise ValueError("the chat template does not write a tool result after a tool call")
    start = one.index(eos, call_at) + len(eos)
    first, last = one[start:].split(one_out)
    rest = two[start:]
    if not rest.startswith(first + one_out) or not rest.endswith(two_out + last):
        raise ValueError("the chat template writes a second tool result unlike the first")
    middle = rest[len(first + one_out) : len(rest) - len(two_out + last)]
    if middle.endswith(first):  # one message per result
        return ObservationText(first, middle[: len(middle) - len(first)], last)
    close = last[: len(last) - len(opening)] if opening and last.endswith(opening) else last
    overlap = next((k for k in range(len(close), 0, -1) if first.startswith(close[-k:])), 0)
    return ObservationText(first, close[: len(close) - overlap], last)


def unusable(where: str, problem: str) -> GymflowError:
    return GymflowError(FailureKind.UNUSABLE_CHECKPOINT, f"{where}: {problem}")


def _fix() -> str:
    return (
        f"gymflow reads tool calls as {TOOL_FORMAT} and appends tool results as 'tool' "
        f"messages: give the checkpoint a chat template that writes them so (as Qwen2.5's "
        f"does), or one that leaves tools out and gymflow adds its own ({WHERE_TEMPLATE})"
    )


def _render(tokenizer, messages: list[dict], tools: list[dict] | None = None, gen=False) -> str:
    return tokenizer.apply_chat_template(
        messages, tools=tools, add_generation_prompt=gen, tokenize=False
    )


def _render_or_refuse(tokenizer, where: str, messages: list[dict], gen: bool = False) -> str:
    try:
        return _render(tokenizer, messages, gen=gen)
    except Exception as exc:  # a template is third-party code: any error means "cannot"
        raise unusable(
            where,
            f"the chat template fails on a plain conversation ({_first_line(exc)}): fix it "
            f"({WHERE_TEMPLATE})",
        ) from None


def _generation_prompt(tokenizer) -> str:
    """What ``add_generation_prompt`` adds after a user turn (the assistant turn's opening)."""
    with_prompt = _render(tokenizer, PROBE_USER, gen=True)
    without = _render(tokenizer, PROBE_USER)
    return with_prompt[len(without) :] if with_prompt.startswith(without) else ""


def _special_prefix(tokenizer, text: str) -> str | None:
    """The longest special or added token ``text`` starts with."""
    tokens = {*tokenizer.all_special_tokens, *tokenizer.get_added_vocab()}
    found = [t for t in tokens if t and text.startswith(t)]
    return max(found, key=len) if found else None


def _reply(text: str) -> dict:
    return {"role": "assistant", "content": text}


def _tool(output: str) -> dict:
    return {"role": "tool", "tool_call_id": "call_0", "name": PROBE_NAME, "content": output}


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:120]}" if text else type(exc).__name__

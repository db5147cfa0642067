"""Tool calling for chat templates that know no tools (SmolLM2's ChatML template, many others).

Such a template drops the ``tools`` argument of ``apply_chat_template`` and renders an
assistant turn's ``tool_calls`` as nothing, so the model would never see its tools and SFT
would train on empty turns. :func:`with_tools` wraps the template: before it runs, the tool list
and how to call a tool go into the system message (prepended to the first one, or as a new
one), and an assistant turn's calls become its text, written exactly as the environments parse
them (:func:`gymflow.core.tool_calls.render_call`: ``<tool_call>{"name": …, "arguments": …}
</tool_call>``). A tool is one signature line and a line per described parameter
(``get_weather(city: string, unit?: "celsius"|"fahrenheit") - Get the weather.``; a nested
object or array parameter keeps its JSON schema): a tool_call prompt takes 353 SmolLM2 tokens
this way against 622 with the tools as JSON schemas (41 without tools), and the prompt is most
of what a real model's SFT and GRPO steps pay for. The original template renders the rest
unchanged. Since the SFT demonstrations, the rollout prompts and the OpenAI server all render through the tokenizer's
template, they all see the same tokens.
"""

from __future__ import annotations

TOOLS_INTRO = (
    "You can call these tools. To call one, answer with "
    '<tool_call>{"name": "<tool name>", "arguments": {<arguments as JSON>}}</tool_call>.'
)

_PREAMBLE = (
    "{%- if tools %}"
    "{%- set ns = namespace(text='" + TOOLS_INTRO + "' + '\\n' + 'Tools:') %}"
    "{%- for t in tools %}{%- set f = t.function if t.function is defined else t %}"
    "{%- set params = f.parameters if f.parameters is defined and f.parameters else {} %}"
    "{%- set required = params.required if params.required is defined else [] %}"
    "{%- set sig = namespace(parts=[], notes=[]) %}"
    "{%- for k, v in (params.properties if params.properties is defined else {}).items() %}"
    "{%- if v.enum is defined %}{%- set kind = v.enum | map('tojson') | join('|') %}"
    "{%- elif v.type is defined and v.type is string and v.type not in ('object', 'array') %}"
    "{%- set kind = v.type %}"
    "{%- else %}{%- set kind = v | tojson %}{%- endif %}"
    "{%- set sig.parts = sig.parts + [k + ('' if k in required else '?') + ': ' + kind] %}"
    "{%- if v.description is defined and v.description %}"
    "{%- set sig.notes = sig.notes + [k + ': ' + v.description] %}{%- endif %}"
    "{%- endfor %}"
    "{%- set ns.text = ns.text + '\\n' + f.name + '(' + sig.parts | join(', ') + ')' %}"
    "{%- if f.description is defined and f.description %}"
    "{%- set ns.text = ns.text + ' - ' + f.description %}{%- endif %}"
    "{%- for note in sig.notes %}{%- set ns.text = ns.text + '\\n  ' + note %}{%- endfor %}"
    "{%- endfor %}"
    "{%- if messages and messages[0].role == 'system' %}"
    "{%- set messages = [{'role': 'system', 'content': ns.text + '\\n\\n' + messages[0].content}]"
    " + messages[1:] %}"
    "{%- else %}{%- set messages = [{'role': 'system', 'content': ns.text}] + messages %}"
    "{%- endif %}{%- endif %}"
    "{%- set calls = namespace(msgs=[]) %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' and m.tool_calls %}"
    "{%- set turn = namespace(text=m.content or '') %}"
    "{%- for tc in m.tool_calls %}{%- set fn = tc.function if tc.function is defined else tc %}"
    "{%- if fn.arguments is string %}"
    "{%- set turn.text = turn.text + '<tool_call>{\"name\": ' + (fn.name | tojson) + "
    "', \"arguments\": ' + fn.arguments + '}</tool_call>' %}"
    "{%- else %}{%- set turn.text = turn.text + '<tool_call>' + "
    "({'name': fn.name, 'arguments': fn.arguments} | tojson) + '</tool_call>' %}"
    "{%- endif %}{%- endfor %}"
    "{%- set calls.msgs = calls.msgs + [{'role': 'assistant', 'content': turn.text}] %}"
    "{%- else %}{%- set calls.msgs = calls.msgs + [m] %}{%- endif %}"
    "{%- endfor %}"
    "{%- set messages = calls.msgs %}"
)


def knows_tools(template: str | None) -> bool:
    """Whether a template renders the ``tools`` it is given."""
    return bool(template) and "tools" in template


def with_tools(template: str) -> str:
    """``template`` with tools rendered into the system message and calls into their turns,
    unless it mentions ``tools`` itself (a cheap guess; :mod:`gymflow.policy.template_check`
    decides by rendering)."""
    if knows_tools(template):
        return template
    return add_tools(template)


def add_tools(template: str) -> str:
    """``template`` behind the preamble that writes tools and calls as text, whatever it holds."""
    return _PREAMBLE + template

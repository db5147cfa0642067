"""The chat template of the embedded model: ChatML turns, compact tool signatures, tool calls.

Newlines are written as ``{{ '\\n' }}`` literals: ``{%- ... %}`` would strip them otherwise, and
TRL's prompt/completion split needs the generation prompt to be an exact prefix of the whole
conversation (:func:`gymflow.core.conversation.split_rendered` refuses a template where it is
not). Tool calls render exactly as :func:`gymflow.core.tool_calls.render_call`.
"""

CHAT_TEMPLATE = (
    "{%- if tools %}{{ '<|im_start|>system' + '\\n' + 'Tools:' + '\\n' }}"
    "{%- for t in tools %}{%- set f = t.function if t.function is defined else t %}"
    "{{ f.name + '(' }}{%- for k, v in f.parameters.properties.items() %}"
    "{{ k }}{%- if not loop.last %}{{ ', ' }}{%- endif %}"
    "{%- endfor %}{{ ')' + '\\n' }}{%- endfor %}{{ '<|im_end|>' + '\\n' }}{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' %}{{ '<|im_start|>assistant' + '\\n' }}"
    "{%- if m.content %}{{ m.content }}{%- endif %}"
    "{%- if m.tool_calls %}{%- for tc in m.tool_calls %}"
    "{%- set fn = tc.function if tc.function is defined else tc %}"
    "{%- if fn.arguments is string %}"
    "{{ '<tool_call>{\"name\": ' + (fn.name | tojson) + ', \"arguments\": ' + fn.arguments + '}</tool_call>' }}"
    "{%- else %}{{ '<tool_call>' + ({'name': fn.name, 'arguments': fn.arguments} | tojson) + '</tool_call>' }}"
    "{%- endif %}{%- endfor %}{%- endif %}{{ '<|im_end|>' + '\\n' }}"
    "{%- else %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant' + '\\n' }}{%- endif %}"
)

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|pad|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
]
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|pad|>"

"""Random-init checkpoints shaped like the ones users bring, built here in seconds.

Each is a transformers config class at a tiny size (~100 k parameters), a byte-level BPE trained
locally with ``tokenizers`` (:func:`gymflow.policy.tiny_model.build_tokenizer`, given the
shape's own special tokens), and the shape's kind of chat template, saved with
``save_pretrained``. Nothing is downloaded. The templates are written here in the style of the
families they stand for:

* ``llama``: LlamaForCausalLM, untied head; a Llama-3-Instruct template (header tokens, turns
  end in ``<|eot_id|>`` while the EOS is ``<|end_of_text|>``, no tools), BOS in the text;
* ``qwen3``: Qwen3ForCausalLM, tied embeddings; a Qwen2.5-style template that lists tools in
  ``<tools>`` and writes calls as ``<tool_call>\\n{...}\\n</tool_call>``, tool results as
  ``<tool_response>`` blocks grouped in one user turn; pad ``<|endoftext|>``;
* ``neox``: GPTNeoXForCausalLM (Pythia's shape); a Zephyr-style template (``<|user|>``, the EOS
  ``<|endoftext|>`` ends every turn, no tools); no pad token;
* ``no_template``: GPT-NeoX as Pythia ships, without a chat template;
* ``json_tools``: Llama with a Llama-3.1-style template writing tool calls as bare JSON
  (``{"name": ..., "parameters": ...}``), a format gymflow's environments do not read.
"""

from __future__ import annotations

import json
from pathlib import Path

LLAMA3 = (
    "{% for message in messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)

QWEN25 = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    'arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": '
    '<function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n\' }}'
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + tool_call.name + \'", "arguments": \' }}'
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}"
    "{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}"
    "{%- endif %}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

ZEPHYR = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

LLAMA31_JSON_TOOLS = (
    "{{- bos_token }}"
    "{%- if tools %}{{- '<|start_header_id|>system<|end_header_id|>\\n\\nRespond with a JSON "
    'for a function call: {"name": function name, "parameters": arguments}.\\n\' }}'
    "{%- for t in tools %}{{- t | tojson + '\\n' }}{%- endfor %}{{- '<|eot_id|>' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.tool_calls %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    '{%- for tc in message.tool_calls %}{{- \'{"name": "\' + tc.function.name + '
    "'\", \"parameters\": ' + (tc.function.arguments | tojson) + '}' }}{%- endfor %}"
    "{{- '<|eot_id|>' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + message.content + '<|eot_id|>' }}"
    "{%- else %}{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + "
    "message.content + '<|eot_id|>' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}"
)

LLAMA3_TOKENS = {
    "special_tokens": [
        "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
        "<|eot_id|>",
    ],
    "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "pad_token": None,
}  # fmt: skip
QWEN_TOKENS = {
    "special_tokens": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"],
    "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
}  # fmt: skip
NEOX_TOKENS = {
    "special_tokens": ["<|endoftext|>", "<|padding|>"],
    "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": None,
}  # fmt: skip

SHAPES = {
    "llama": ("llama", LLAMA3_TOKENS, LLAMA3),
    "qwen3": ("qwen3", QWEN_TOKENS, QWEN25),
    "neox": ("gpt_neox", NEOX_TOKENS, ZEPHYR),
    "no_template": ("gpt_neox", NEOX_TOKENS, None),
    "json_tools": ("llama", LLAMA3_TOKENS, LLAMA31_JSON_TOOLS),
}
"""Shape name -> (architecture, tokenizer tokens, chat template)."""


def corpus(envs, n: int = 200, seed: int = 5) -> list[str]:
    """Plain text a user's tokenizer could have seen: the tasks' prompts, tools and answers."""
    from gymflow.data.task_set import build_tasks

    texts = []
    for env in envs:
        for task in build_tasks(env, n, seed, 0.0, 0.0):
            texts += [m["content"] for m in task.prompt]
            texts += [json.dumps(task.tools), env.gold_text(task)]
    return texts


def model_config(arch: str, tokenizer, width: int = 32, layers: int = 2):
    """A tiny config of ``arch`` for ``tokenizer`` (heads of 8, a 2048-token context)."""
    from transformers import GPTNeoXConfig, LlamaConfig, Qwen3Config

    ids = {
        "vocab_size": len(tokenizer),
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "max_position_embeddings": 2048,
        "hidden_size": width,
        "num_hidden_layers": layers,
        "num_attention_heads": width // 8,
        "intermediate_size": width * 2,
    }
    if arch == "llama":
        return LlamaConfig(**ids, num_key_value_heads=width // 8, tie_word_embeddings=False)
    if arch == "qwen3":
        return Qwen3Config(
            **ids, num_key_value_heads=width // 16, head_dim=8, tie_word_embeddings=True
        )
    return GPTNeoXConfig(**ids, tie_word_embeddings=False)


def save_checkpoint(shape: str, out: Path, texts: list[str], seed: int = 0) -> Path:
    """Build the ``shape`` checkpoint into ``out`` (``save_pretrained`` layout); returns it."""
    import torch
    from transformers import AutoModelForCausalLM

    from gymflow.policy.tiny_model import build_tokenizer

    arch, tokens, template = SHAPES[shape]
    tokenizer = build_tokenizer(texts, 768, chat_template=template, **tokens)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(model_config(arch, tokenizer))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out

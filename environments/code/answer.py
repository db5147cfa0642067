r"""From a model's reply to a runnable module: extract the code, complete the function.

The code is the last fenced block tagged ``python`` (or ``py``, ``python3``) in the reply, or
the whole reply when there is none. A reply that defines the entry point (the usual chat
answer: the whole function) is appended to the task's prompt code, so the prompt's imports and
helpers stay defined and the answer's ``def`` replaces the stub; anything else is taken as
the function's body, continuing the prompt (the HumanEval completion format); a body whose
first line lost its indent (the agent loop strips replies) gets it back.

>>> prompt = "def inc(x: int) -> int:\n    'Add one.'\n"
>>> reply = "Sure:\n```python\ndef inc(x):\n    return x + 1\n```"
>>> print(assemble(prompt, extract_code(reply), "inc"))
def inc(x: int) -> int:
    'Add one.'
<BLANKLINE>
def inc(x):
    return x + 1
<BLANKLINE>
>>> assemble(prompt, "y = x + 1\n    return y", "inc").endswith("'Add one.'\n    y = x + 1\n    return y")
True
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(text: str) -> str:
    """The last ```python block of ``text``, or all of ``text`` when it has none."""
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else text


def defines(code: str, name: str) -> bool:
    """Whether ``code`` has a top-level ``def name(`` (a complete function, not a body)."""
    return re.search(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None


def assemble(prompt_code: str, code: str, entry_point: str) -> str:
    """The module to run: the prompt's code, then the answer (a whole function or a body)."""
    if defines(code, entry_point):
        head = prompt_code if prompt_code.endswith("\n") else prompt_code + "\n"
        return head + "\n" + code
    return prompt_code + _as_body(code)


def _as_body(code: str) -> str:
    """Indent a body whose first line lost its indent (replies are stripped) or that has none.

    A reply starting with a definition (``def``, ``class``, a decorator) is module code, as
    is an import with nothing indented after it; those are left as they are.
    """
    lines = code.split("\n")
    first = lines[0]
    if not first[:1].strip() or re.match(r"(?:async\s+def|def|class)\b|@", first):
        return code
    if any(line[:1].isspace() for line in lines[1:] if line.strip()):
        return "    " + code  # only the first line was stripped
    if first.startswith(("import ", "from ")):
        return code
    return "".join(f"    {line}\n" if line.strip() else "\n" for line in lines)

"""The worked example agents behind a counter: the lifecycle test (``tests/test_agent_lifecycle.py``)
names these as its agent programs to see that the examples made GRPO's episodes. Each call is
counted, then handed to the example unchanged."""

from __future__ import annotations

from collections import Counter
from threading import Lock

from gymflow.agent.external import load_program

CALLS: Counter[str] = Counter()
_LOCK = Lock()


def _counted(name: str):
    program = load_program(f"examples/agents/{name}.py:run")

    def run(**kwargs):
        with _LOCK:
            CALLS[name] += 1
        return program(**kwargs)

    return run


langgraph_agent = _counted("langgraph_agent")
openai_agents_sdk_agent = _counted("openai_agents_sdk_agent")

"""An OpenAI Agents SDK agent over any OpenAI-compatible chat/completions endpoint.

Plain Agents SDK (``Agent`` + ``Runner``, the Chat Completions model); nothing here knows
gymflow. Tracing is off (it would send traces to OpenAI). Its tools are HTTP tools, as in
``langgraph_agent.py``: each is an OpenAI function schema whose call POSTs its JSON arguments
to ``{tool_url}/{name}``. With ``answer_is_the_call`` the agent stops at its first tool call
(``tool_use_behavior="stop_on_first_tool"``): the call is the answer, the ``tool_call``
environment's contract. To train on its episodes, point ``base_url`` at gymflow's capturing
proxy (``docs/how-to/external-agents.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import httpx
from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    set_tracing_disabled,
)
from openai import AsyncOpenAI


def http_tools(schemas: list[dict], tool_url: str) -> list[FunctionTool]:
    """One SDK tool per OpenAI function schema, run by the tool service at ``tool_url``."""

    def tool(fn: dict) -> FunctionTool:
        async def invoke(_context, arguments: str) -> str:
            async with httpx.AsyncClient(timeout=60) as http:
                resp = await http.post(f"{tool_url}/{fn['name']}", json=json.loads(arguments))
                resp.raise_for_status()
                return json.dumps(resp.json())

        return FunctionTool(
            name=fn["name"],
            description=fn.get("description", ""),
            params_json_schema=fn.get("parameters") or {"type": "object", "properties": {}},
            on_invoke_tool=invoke,
            strict_json_schema=False,  # the schema as written (defaults, optional arguments)
        )

    return [tool(s.get("function", s)) for s in schemas]


async def run_async(
    prompt: list[dict],
    tools: list[dict],
    base_url: str,
    api_key: str = "none",
    tool_url: str = "",
    model: str = "policy",
    temperature: float = 1.0,
    max_tokens: int = 48,
    answer_is_the_call: bool = True,
) -> str:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=1, timeout=120)
    agent = Agent(
        name="assistant",
        model=OpenAIChatCompletionsModel(model=model, openai_client=client),
        model_settings=ModelSettings(temperature=temperature, max_tokens=max_tokens),
        tools=http_tools(tools, tool_url),
        tool_use_behavior="stop_on_first_tool" if answer_is_the_call else "run_llm_again",
    )
    try:
        result = await Runner.run(agent, input=prompt, max_turns=6)
    finally:
        await client.close()
    return str(result.final_output)


def run(prompt: list[dict], tools: list[dict], base_url: str, **kwargs) -> str:
    """Synchronous entry point (the agent runs in its own event loop)."""
    return asyncio.run(run_async(prompt, tools, base_url, **kwargs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--tool-url", required=True)
    parser.add_argument("--tools", help="JSON file of OpenAI tool schemas (default: none)")
    parser.add_argument("--prompt", required=True)
    args = parser.parse_args()
    schemas = json.loads(Path(args.tools).read_text()) if args.tools else []
    prompt = [{"role": "user", "content": args.prompt}]
    print(run(prompt, schemas, args.base_url, tool_url=args.tool_url))


if __name__ == "__main__":
    main()

"""A small LangGraph agent: a model node and a tool node in a loop, over any OpenAI-compatible
endpoint.

Plain LangGraph and LangChain; nothing here knows gymflow. Its tools are HTTP tools: each is
described by an OpenAI function schema and runs by POSTing its JSON arguments to
``{tool_url}/{name}`` (a tool service). To train on its episodes, point ``base_url`` at
gymflow's capturing proxy and ``tool_url`` at the proxy's tool endpoint for the episode
(``gymflow agent proxy``; see ``docs/how-to/external-agents.md``). With ``answer_is_the_call``
the first tool call ends the run: the call is the answer (the ``tool_call`` environment's
contract), as LangChain's ``return_direct`` tools do.

Run it alone against any server::

    python examples/agents/langgraph_agent.py --base-url http://127.0.0.1:8000/v1 \\
        --tool-url http://127.0.0.1:8801/episodes/E/tools --prompt "Set a timer for 5 minutes"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Annotated, TypedDict

import httpx
from langchain_core.messages import AnyMessage
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def http_tools(schemas: list[dict], tool_url: str, answer_is_the_call: bool) -> list:
    """One LangChain tool per OpenAI function schema, run by the tool service at ``tool_url``."""

    def tool(fn: dict) -> StructuredTool:
        def call(**arguments) -> str:
            resp = httpx.post(f"{tool_url}/{fn['name']}", json=arguments, timeout=60)
            resp.raise_for_status()
            return json.dumps(resp.json())

        return StructuredTool.from_function(
            func=call,
            name=fn["name"],
            description=fn.get("description", ""),
            args_schema=fn.get("parameters") or {"type": "object", "properties": {}},
            return_direct=answer_is_the_call,
        )

    return [tool(s.get("function", s)) for s in schemas]


def build_graph(model: ChatOpenAI, tools: list):
    """model -> (tools -> model)* -> end; a return_direct tool ends the loop after it runs."""
    bound = model.bind_tools(tools)
    direct = {t.name for t in tools if t.return_direct}

    def call_model(state: State) -> dict:
        return {"messages": [bound.invoke(state["messages"])]}

    def after_tools(state: State) -> str:
        last = state["messages"][-1]
        return END if getattr(last, "name", None) in direct else "model"

    graph = StateGraph(State)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_conditional_edges("tools", after_tools, {"model": "model", END: END})
    return graph.compile()


def run(
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
    """Run the agent on ``prompt`` (chat messages) with ``tools``; returns its last message."""
    llm = ChatOpenAI(
        model=model,
        base_url=base_url,
        api_key=api_key,
        temperature=temperature,
        max_tokens=max_tokens,
        max_retries=1,
        timeout=120,
    )
    graph = build_graph(llm, http_tools(tools, tool_url, answer_is_the_call))
    result = graph.invoke({"messages": prompt}, {"recursion_limit": 12})
    return str(result["messages"][-1].content)


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

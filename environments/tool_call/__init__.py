"""tool_call: a natural-language request becomes exactly one JSON tool call."""

from gymflow.environments.tool_call.environment import ToolCallEnvironment

__all__ = ["ToolCallEnvironment"]

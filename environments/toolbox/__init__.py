"""toolbox: several tools per task; one to three calls, nested arguments, declining when no
tool fits; held-out tasks on tools training never shows."""

from gymflow.environments.toolbox.environment import ToolboxEnvironment

__all__ = ["ToolboxEnvironment"]

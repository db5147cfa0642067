"""counter: session-isolated stateful tools (NeMo Gym's example_session_state_mgmt task)."""

from gymflow.environments.counter.environment import CounterEnvironment

__all__ = ["CounterEnvironment"]

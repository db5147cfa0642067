"""counter: session-isolated stateful tools (NeMo Gym's example_session_state_mgmt, done here)."""

from gymflow.environments.counter.server import CounterServer

__all__ = ["CounterServer"]

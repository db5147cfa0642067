"""workplace: a multi-step office assistant on WorkBench's sandbox (email, calendar, analytics,
project tasks, CRM), scored by outcome."""

from gymflow.environments.workplace.server import WorkplaceServer

__all__ = ["WorkplaceServer"]

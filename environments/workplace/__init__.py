"""workplace: a multi-step office assistant on WorkBench's sandbox (email, calendar, analytics,
project tasks, CRM), scored by outcome."""

from gymflow.environments.workplace.environment import WorkplaceEnvironment

__all__ = ["WorkplaceEnvironment"]

"""A team's stack on one box: PostgreSQL, the Prefect server, the MLflow server, a worker.

``gymflow stack up|status|down|check`` (:mod:`gymflow.stack.control`) runs them as background
processes from one settings file (:mod:`gymflow.stack.settings`); :mod:`gymflow.stack.check`
says in one line what is wrong with the servers a machine is pointed at.
"""

"""Agents as services: the episode driver behind ``POST /run``, and a capturing proxy.

* :mod:`~gymflow.agent.server` — ``gymflow agent serve``: :func:`gymflow.rollout.driver.run_episode`
  over HTTP (task + policy + environment in, trajectory + reward + token view out), with the
  same conventions as the resources server and ``gymflow policy serve``.
* :mod:`~gymflow.agent.runner` — runs a collection's or an evaluation's planned rollouts on
  agent servers instead of this process's window (same rows, row for row).
* :mod:`~gymflow.agent.proxy` — an OpenAI-compatible proxy in front of any policy backend that
  records each call's token ids and logprobs, so an agent written in any framework produces
  trainable rollout rows; :mod:`~gymflow.agent.external` drives such agents for GRPO.
"""

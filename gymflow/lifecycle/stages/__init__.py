"""The lifecycle's stages as library functions: each takes the run, its config and the earlier
stages' typed results (:mod:`gymflow.lifecycle.stage_results`) and returns its own, logging to
MLflow as it goes. ``tasks/`` wraps each in a Prefect task (caching, retries, state in the UI)
and ``flows/lifecycle.py`` wires them; a script or a benchmark calls them as they are.

==============================  ========================================================
module                          stage
==============================  ========================================================
:mod:`.policy`                  resolve_policy: a path, the champion or the embedded model
:mod:`.generate`                generate_tasks: tasks, dedup, splits, coverage
:mod:`.profile`                 profile_verifiers: samples, gold answers, probes
:mod:`.drift`                   check_verifier_drift: the champion's verdicts re-scored
:mod:`.evaluate`                evaluate_baseline (and evaluate_split): the SFT decision
:mod:`.training`                train_sft, train_grpo, train_sft_control
:mod:`.gate`                    run_heldout_gate: the sequential held-out gate
:mod:`.promote`                 promote_candidate: the registry and its aliases
==============================  ========================================================
"""

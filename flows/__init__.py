"""Prefect flows: wiring only. The lifecycle is on one screen in ``flows/lifecycle.py``."""

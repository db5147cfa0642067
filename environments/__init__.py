"""Environments: one folder per environment, each on gymflow's ResourcesServer base."""

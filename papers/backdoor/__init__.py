"""Trajectory backdoor attacks on offline-RL driving agents (papers.md). See README.md."""

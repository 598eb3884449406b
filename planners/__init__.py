"""PDDL planning: domain learning, fusion, retrieval, solving and validation (issue: planning)."""

"""Robot interfaces, the safety supervisor and drivers (issue: hardware layer)."""

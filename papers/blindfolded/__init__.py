"""Blindfolded experts: behavioral cloning from experts denied task information (papers.md). See README.md."""

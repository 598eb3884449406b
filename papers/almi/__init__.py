"""ALMI: adversarial locomotion and motion imitation on the Unitree H1-2 (papers.md). See README.md."""

from pathlib import Path

POLICY = Path(__file__).parent / "policies" / "almi"  # the committed whole-body run (README: "The checkpoint")

"""ALMI: adversarial locomotion and motion imitation on the Unitree H1-2 (papers.md). See README.md."""

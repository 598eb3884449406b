"""PRIMT (arXiv 2509.15607): preference-based RL whose preferences come from foundation-model judges — an LLM over
numeric trajectory summaries, a VLM over keyframes — fused by weighted logic rules. Built on the core's preference
reward learning (``embody.policies.preference``) and SAC; this plugin adds the judges, their fusion, the stand-in
judges served on loopback, and the ``embody primt`` commands."""

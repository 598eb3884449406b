"""The policy classes a checkpoint may name (``checkpoint.json`` "policy_class"), loaded lazily.

Kept apart from ``checkpoint.py`` so that plugins register theirs without importing torch.
"""

from embody.registry import Registry

POLICY_CLASSES: Registry = Registry("policy")
POLICY_CLASSES.register("ActorCritic", "embody.policies.actor_critic:ActorCritic")
POLICY_CLASSES.register("RecurrentActorCritic", "embody.policies.recurrent:RecurrentActorCritic")
POLICY_CLASSES.register("TrajectoryMLP", "embody.policies.trajectory:TrajectoryMLP")
POLICY_CLASSES.register("DiffusionModel", "embody.policies.diffusion:DiffusionModel")
POLICY_CLASSES.register("QModel", "embody.policies.value:QModel")
POLICY_CLASSES.register("OfflineAgent", "embody.policies.offline:OfflineAgent")
POLICY_CLASSES.register("DecisionTransformer", "embody.policies.decision_transformer:DecisionTransformer")
POLICY_CLASSES.register("CompositePolicy", "embody.policies.compose:CompositePolicy")
POLICY_CLASSES.register("SACPolicy", "embody.policies.sac:SACPolicy")
POLICY_CLASSES.register("RewardModel", "embody.policies.preference:RewardModel")

"""The registry of tasks by name (loaded lazily)."""

from embody.registry import Registry

TASKS: Registry = Registry("task")
TASKS.register("cartpole-swingup", "embody.sims.tasks.cartpole_swingup:CartpoleSwingup")
TASKS.register("gym-humanoid", "embody.sims.tasks.gym_humanoid:GymHumanoid")

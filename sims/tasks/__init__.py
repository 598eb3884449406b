"""The registry of tasks by name (loaded lazily)."""

from embody.registry import Registry

TASKS: Registry = Registry("task")
TASKS.register("cartpole-swingup", "embody.sims.tasks.cartpole_swingup:CartpoleSwingup")
TASKS.register("gym-humanoid", "embody.sims.tasks.gym_humanoid:GymHumanoid")
TASKS.register("hopper", "embody.sims.tasks.gym_hopper:GymHopper")
TASKS.register("h1_2-velocity", "embody.sims.tasks.h1_2_velocity:H1_2Velocity")
TASKS.register("arm-reach", "embody.sims.tasks.arm_reach:ArmReach")
TASKS.register("peg-insert", "embody.sims.tasks.peg_insert:PegInsert")
TASKS.register("h1_2-stand", "embody.sims.tasks.h1_2_stand:H1_2Stand")

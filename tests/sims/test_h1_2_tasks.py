"""h1_2-velocity and h1_2-stand: observations from the observed state only, commands, domain
randomization, falls, motion clips, and every installed simulator."""

import numpy as np
import pytest

from embody.robots import get_robot
from embody.robots.motion import MotionClip, MotionError, generate_library
from embody.sims import installed_simulators
from embody.sims.base import UnsupportedTask
from embody.sims.tasks import TASKS
from embody.sims.tasks.h1_2_stand import H1_2StandConfig
from embody.sims.tasks.h1_2_velocity import H1_2VelocityConfig
from embody.sims.vec_env import make_env

SIMS = [pytest.param(s, marks=pytest.mark.genesis) if s == "genesis" else s for s in installed_simulators()]


def velocity_env(n=4, **randomization):
    cfg = H1_2VelocityConfig()
    for k, v in randomization.items():
        setattr(cfg.randomization, k, v)
    return make_env("h1_2-velocity", n_envs=n, seed=0, config=cfg)


def test_observation_layout_and_only_observed_state():
    env = velocity_env()
    obs, priv = env.reset()
    assert obs.shape == (4, 47 * 5) and priv.shape == (4, 13)  # five frames of 47 by default, newest first
    for _ in range(5):
        obs, *_ = env.step(np.full((4, 12), 0.3))
    state = env.sim.state()
    # the policy's observation is the same whether or not the simulator's ground truth is there
    np.testing.assert_array_equal(env.task.observe(state.observed()), env.task.observe(state))
    np.testing.assert_allclose(obs[:, 33:45], 0.3)  # last action
    phase = 2 * np.pi * state.time / 0.8
    np.testing.assert_allclose(obs[:, 45], np.sin(phase), atol=1e-6)
    np.testing.assert_allclose(obs[:, 46], np.cos(phase), atol=1e-6)
    # upright at rest: gravity straight down in the base frame, from the IMU
    np.testing.assert_allclose(obs[:, 3:6], np.tile([0, 0, -1.0], (4, 1)), atol=0.1)


def test_commands_are_sampled_in_range_and_out_of_range_ones_refused():
    env = velocity_env(n=64)
    env.reset()
    cmd, c = env.task.commands, env.task.config.commands
    assert (cmd[:, 0] >= c.lin_vel_x[0]).all() and (cmd[:, 0] <= c.lin_vel_x[1]).all()
    assert (cmd[:, 2] >= c.yaw_rate[0]).all() and (cmd[:, 2] <= c.yaw_rate[1]).all()
    env.task.set_commands(np.array([0]), np.array([[0.5, 0.0, -0.2]]))
    np.testing.assert_array_equal(env.task.commands[0], [0.5, 0.0, -0.2])
    with pytest.raises(ValueError, match=r"vx = 3 lies outside the trained range \[-1, 1\]"):
        env.task.set_commands(np.array([0]), np.array([[3.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="finite"):
        env.task.set_commands(np.array([0]), np.array([[np.nan, 0.0, 0.0]]))


def test_domain_randomization_reaches_the_simulator_and_the_privileged_observation():
    env = velocity_env(n=16, push_interval_s=(0.1, 0.1), push_velocity=1.0)
    _, priv = env.reset()
    task, r = env.task, env.task.config.randomization
    assert (task.friction >= r.friction[0]).all() and (task.friction <= r.friction[1]).all()
    assert task.friction.std() > 0 and task.added_mass.std() > 0
    np.testing.assert_allclose(priv[:, 6], task.friction, rtol=1e-6)
    masses = np.array([m.body_mass.sum() for m in env.sim._models])
    nominal = env.sim.model.body_mass.sum()
    np.testing.assert_allclose(masses, nominal * task.mass_scale + task.added_mass, rtol=1e-9)
    for _ in range(7):  # pushes every 0.1 s = 5 control steps, the first before step 6
        _, _, _, _, info = env.step(np.zeros((16, 12)))
    push = info.privileged_obs[:, 9:12]
    assert (np.abs(push[:, :2]) > 0).any() and (push[:, 2] == 0).all()


def test_pd_gain_randomization_reaches_the_simulator_only_when_asked():
    env = velocity_env(n=8, kp_scale=(0.8, 1.2), kd_scale=(0.5, 1.5))
    env.reset()
    kp = np.array([m.actuator_gainprm[0, 0] for m in env.sim._models]) / env.sim.model.actuator_gainprm[0, 0]
    kd = np.array([m.actuator_biasprm[0, 2] for m in env.sim._models]) / env.sim.model.actuator_biasprm[0, 2]
    assert kp.min() >= 0.8 and kp.max() <= 1.2 and kp.std() > 0 and kd.min() >= 0.5 and kd.max() <= 1.5
    params = velocity_env(n=2).task.sample_physics(np.arange(2))  # the default: gains untouched
    assert params.kp_scale is None and params.kd_scale is None


def test_actuator_randomization_starts_at_its_onset_in_training_and_always_in_evaluation():
    task = velocity_env(n=2, kp_scale=(0.8, 1.2), armature_scale=(0.5, 1.5), actuator_onset_steps=4).task
    assert task.curriculum_levels()["actuator_range"] == 0.0
    params = task.sample_physics(np.arange(2))
    assert params.kp_scale is None and params.armature_scale is None and params.friction.std() > 0
    task.after_step(np.zeros((2, 12)))
    task.after_step(np.zeros((2, 12)))  # 2 envs × 2 steps reach the onset
    assert task.curriculum_levels()["actuator_range"] == 1.0
    assert task.sample_physics(np.arange(2)).kp_scale.std() > 0
    task.reseed(1)  # restarts the count; evaluation draws them regardless
    task.training = False
    assert task.sample_physics(np.arange(2)).armature_scale.std() > 0


def test_actuator_ranges_widen_over_their_ramp_in_training_and_are_full_in_evaluation():
    task = velocity_env(n=64, kp_scale=(0.8, 1.2), armature_scale=(0.5, 1.5), actuator_ramp_steps=256).task
    assert task.curriculum_levels()["actuator_range"] == 0.0 and task.sample_physics(np.arange(64)).kp_scale is None
    task.trained_steps = 64  # a quarter of the ramp: kp in 1 ± 0.05, armature in 1 ± 0.125
    params = task.sample_physics(np.arange(64))
    assert task.curriculum_levels()["actuator_range"] == 0.25
    assert 0.95 <= params.kp_scale.min() and params.kp_scale.max() <= 1.05 and params.kp_scale.std() > 0
    assert 0.875 <= params.armature_scale.min() and params.armature_scale.max() <= 1.125
    task.trained_steps = 10**6
    assert task.actuator_range == 1.0 and task.sample_physics(np.arange(64)).armature_scale.max() > 1.125
    task.reseed(1)
    task.training = False
    assert task.actuator_range == 1.0


def test_action_delay_applies_the_previous_action():
    env = velocity_env(n=2, action_delay_steps=1)
    env.reset()
    env.task.delay[:] = [0, 1]
    a1, a2 = np.full((2, 12), 0.4), np.full((2, 12), -0.4)
    env.task.action_to_command(a1)
    cmd = env.task.action_to_command(a2)
    legs, q0, s = env.task.legs, env.task.q0, env.task.config.legged.action_scale
    np.testing.assert_allclose(cmd[0, legs], q0[legs] - 0.4 * s)
    np.testing.assert_allclose(cmd[1, legs], q0[legs] + 0.4 * s)


def test_leg_targets_move_no_faster_than_the_rate_limit_and_restart_from_the_default_pose():
    env = velocity_env(n=2, enabled=False)
    env.task.config.legged.target_rate_limit = 1.0
    env.reset()
    task, big = env.task, np.full((2, 12), 10.0)
    legs, q0, per_step = task.legs, task.q0, task.leg_speed_limit * task.dt  # ankles: 9 rad/s · 0.02 s
    first = task.action_to_command(big)[:, legs]
    np.testing.assert_allclose(first, np.tile(np.minimum(q0[legs] + per_step, task.robot.upper[legs]), (2, 1)))
    second = task.action_to_command(big)[:, legs]
    assert (second - first <= per_step + 1e-12).all() and (second > first).any()
    task.on_reset(np.array([1]))
    third = task.action_to_command(-big)[:, legs]
    np.testing.assert_allclose(third[1], np.maximum(q0[legs] - per_step, task.robot.lower[legs]))
    np.testing.assert_allclose(third[0], np.maximum(second[0] - per_step, task.robot.lower[legs]))
    task.config.legged.target_rate_limit = 0.0  # off: the target follows the action at once
    at_once = np.clip(q0[legs] + 10.0 * task.config.legged.action_scale, task.robot.lower[legs], task.robot.upper[legs])
    np.testing.assert_allclose(task.action_to_command(big)[:, legs], np.tile(at_once, (2, 1)))


def test_feet_phase_pays_for_following_the_gait_clock():  # feet_phase: defined, off by default
    import dataclasses

    env = velocity_env(n=3, enabled=False)
    env.reset()
    task, state = env.task, env.sim.state()
    task.set_commands(np.arange(3), np.array([[0.5, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    period = task.config.legged.gait_period_s
    state = dataclasses.replace(state, time=np.full(3, 0.775 * period))  # left foot mid-swing, right in stance
    feet = state.privileged.foot_pos.copy()
    feet[:, :, 2] = [[0.08, 0.0], [0.0, 0.0], [0.08, 0.0]]
    state = dataclasses.replace(state, privileged=dataclasses.replace(state.privileged, foot_pos=feet))
    np.testing.assert_allclose(task.reward_feet_phase(state, None), [1.0, np.exp(-0.64), np.exp(-0.64)])
    # stepping in place: a zero command follows the gait clock too
    task.config.legged.step_in_place = True
    np.testing.assert_allclose(task.reward_feet_phase(state, None), [1.0, np.exp(-0.64), 1.0])
    assert task._stance(state).dtype == bool


def test_the_reference_gait_bends_the_swinging_leg_only():  # reference_swing: defined, off by default
    import dataclasses

    cfg = H1_2VelocityConfig()
    cfg.randomization.enabled, cfg.legged.reference_swing = False, 0.3
    env = make_env("h1_2-velocity", n_envs=2, seed=0, config=cfg)
    env.reset()
    task = env.task
    task.set_commands(np.arange(2), np.array([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]))  # env 1 stands still
    state = dataclasses.replace(env.sim.state(), time=np.full(2, 0.775 * cfg.legged.gait_period_s))
    task.observe(state)  # left foot mid-swing
    legs, q0 = task.legs, task.q0[task.legs]
    targets = task.action_to_command(np.zeros((2, 12)))[:, : len(legs)]  # legs lead the actuated joints
    bend = np.zeros(12)
    bend[[1, 3, 4]] = [-0.3, 0.6, -0.3]  # left hip pitch, knee, ankle pitch
    np.testing.assert_allclose(targets, [q0 + bend, q0])


@pytest.mark.parametrize("task", ["h1_2-velocity", "h1_2-stand"])
def test_targets_stay_within_the_joint_ranges(task):
    """What the hardware supervisor would clamp, training never commands."""
    env = make_env(task, n_envs=2, seed=0)
    env.reset()
    robot = env.task.robot
    for action in (np.full((2, env.action_size), 10.0), np.full((2, env.action_size), -10.0)):
        targets = env.task.action_to_command(action)
        assert (targets >= robot.lower[robot.actuated]).all() and (targets <= robot.upper[robot.actuated]).all()
    env.close()


def test_a_fall_terminates_the_episode():
    env = velocity_env(n=2, enabled=False)
    env.reset()
    tilted = env.task.reset_distribution(np.array([1]))
    tilted.base_quat = np.array([[np.cos(0.5), np.sin(0.5), 0.0, 0.0]])  # 57° roll
    env.sim.reset(np.array([1]), tilted)
    _, _, terminated, _, info = env.step(np.zeros((2, 12)))
    assert terminated.tolist() == [False, True]
    assert len(info.episode_length) == 1


def test_over_speed_ends_the_episode_only_when_asked():
    env = velocity_env(n=2, enabled=False)
    env.reset()
    state = env.sim.state()
    knee = env.task.legs[3]  # left knee, limit 14 rad/s (vendor)
    state.joint_vel[1, knee] = 1.3 * env.task.robot.velocity_limit[knee]  # past the supervisor's 1.2×
    assert env.task.terminated(state).tolist() == [False, False]
    env.task.config.legged.over_speed_end = 1.2
    assert env.task.terminated(state).tolist() == [False, True]


def test_evaluation_reports_tracking_errors_and_survival(tmp_path):
    from embody.policies.base import RandomPolicy
    from embody.policies.evaluate import evaluate

    env = velocity_env(n=4, enabled=False)
    env.reset()
    env.task.set_commands(np.arange(4), np.tile([0.5, 0.0, -0.4], (4, 1)))
    _, _, _, _, info = env.step(np.zeros((4, 12)))
    v = env.sim.state().privileged
    assert info.metrics["lin_vel_error"] == pytest.approx(np.linalg.norm([0.5, 0.0] - v.base_lin_vel[:, :2], axis=1))
    assert info.metrics["yaw_rate_error"] == pytest.approx(np.abs(-0.4 - v.base_ang_vel[:, 2]))
    summary = evaluate(env, RandomPolicy(env.task.observation_size, 12), episodes=4).summary()
    assert summary["lin_vel_error"] > 0 and summary["yaw_rate_error"] > 0  # a random policy tracks nothing
    assert env.task.terminations_are_falls


def test_gait_averages_cover_the_last_gait_period():
    cfg = H1_2VelocityConfig()
    cfg.randomization.enabled = False
    cfg.reward_weights.update(tracking_yaw_gait=0.5, yaw_oscillation=-0.5)
    cfg.legged.reward_onset_steps = {}  # the yaw swing counts from the first step
    env = make_env("h1_2-velocity", n_envs=2, seed=0, config=cfg)
    env.reset()
    env.task.set_commands(np.arange(2), np.array([[0.5, 0.0, 0.3], [0.0, 0.2, -0.3]]))
    period, rng, seen = len(env.task.velocity_history), np.random.default_rng(0), []
    assert period == 40  # 0.8 s of 0.02 s control steps
    for _ in range(period + 7):
        _, _, _, _, info = env.step(rng.uniform(-0.3, 0.3, (2, 12)))
        p = env.sim.state().privileged
        seen.append(np.concatenate([p.base_lin_vel[:, :2], p.base_ang_vel[:, 2:]], axis=1))
    mean = np.mean(seen[-period:], axis=0)
    np.testing.assert_allclose(env.task.gait_velocity(), mean)
    assert info.metrics["yaw_rate_error_gait"] == pytest.approx(np.abs([0.3, -0.3] - mean[:, 2]))
    assert info.metrics["lin_vel_error_gait"] == pytest.approx(
        np.linalg.norm([[0.5, 0], [0, 0.2]] - mean[:, :2], axis=1)
    )
    swing = (env.sim.state().privileged.base_ang_vel[:, 2] - mean[:, 2]) ** 2
    level = env.task.penalty_level  # the curriculum's, in training
    assert info.reward_terms["yaw_oscillation"] == pytest.approx(level * -0.5 * 0.02 * swing.mean())
    state, task = env.sim.state(), env.task  # the linear tracking terms (defined, off by default) read the averages
    yaw_err, lin_err = np.abs([0.3, -0.3] - mean[:, 2]), np.linalg.norm([[0.5, 0], [0, 0.2]] - mean[:, :2], axis=1)
    np.testing.assert_allclose(task.reward_tracking_yaw_linear(state, None), 1 - np.minimum(yaw_err, 1))
    np.testing.assert_allclose(task.reward_tracking_lin_vel_linear(state, None), 1 - np.minimum(lin_err, 1))
    env.task.on_reset(np.array([0]))  # a reset forgets env 0's history only
    assert (env.task.gait_velocity()[0] == 0).all() and (env.task.gait_velocity()[1] != 0).all()


def test_joint_speeds_past_the_limits_are_penalized_and_reported():  # dof_vel_limits: defined, off by default
    import dataclasses

    env = velocity_env(n=2, enabled=False)
    env.reset()
    state = env.sim.state()
    task, limit = env.task, env.task.robot.velocity_limit[env.task.legs]
    qd = state.joint_vel.copy()
    qd[:, task.legs] = 0.5 * limit
    qd[1, task.legs[3]] = -1.1 * limit[3]  # env 1's left knee past its limit
    state = dataclasses.replace(state, joint_vel=qd)
    np.testing.assert_allclose(task.reward_dof_vel_limits(state, None), [0.0, 0.2 * limit[3]])
    assert task.step_metrics(state)["over_speed"].tolist() == [0.0, 1.0]
    assert task.step_metrics(state)["supervisor_fault"].tolist() == [0.0, 0.0]  # 1.1 × < the supervisor's 1.2 ×
    arm = task.robot.group("arms")[0]
    qd[0, arm] = 1.3 * task.robot.velocity_limit[arm]  # any joint, as the supervisor checks
    state = dataclasses.replace(state, joint_vel=qd)
    assert task.step_metrics(state)["supervisor_fault"].tolist() == [1.0, 0.0]


def test_unclipped_penalties_survive_the_positive_clip():
    import dataclasses

    cfg = H1_2VelocityConfig()
    cfg.randomization.enabled, cfg.penalty_curriculum.enabled = False, False
    cfg.reward_weights["dof_vel_limits"] = -5.0
    cfg.legged.unclipped, cfg.legged.unclipped_from_steps = ("dof_vel_limits",), 4
    env = make_env("h1_2-velocity", n_envs=2, seed=0, config=cfg)
    env.reset()
    state = env.sim.state()
    qd = state.joint_vel.copy()
    qd[1, env.task.legs[4]] = 3.0 * env.task.leg_speed_limit[4]  # env 1 slaps an ankle
    state = dataclasses.replace(state, joint_vel=qd)

    def env1() -> tuple[float, float]:  # (env 1's reward, what it is with the slap added after the clip)
        total, terms = env.task.reward(state, np.zeros((2, 12)))
        slap = terms.pop("dof_vel_limits")[1]
        assert slap < -0.1
        return total[1], max(sum(v[1] for v in terms.values()), 0.0) + slap

    reward, unclipped = env1()
    assert reward == 0.0 != unclipped  # before unclipped_from_steps: the slap costs at most the step's positive reward
    env.step(np.zeros((2, 12)))  # 2 envs × 2 steps of training
    assert env.task.curriculum_levels()["unclipped"] == 0.0
    env.step(np.zeros((2, 12)))
    assert env.task.curriculum_levels()["unclipped"] == 1.0
    reward, unclipped = env1()
    assert reward == pytest.approx(unclipped)
    env.task.reseed(1)  # restarts the count; evaluation applies them at once
    assert env1()[0] == 0.0
    env.task.training = False
    reward, unclipped = env1()
    assert reward == pytest.approx(unclipped)
    cfg.legged.unclipped = ("no_such_term",)
    with pytest.raises(ValueError, match="no_such_term"):
        make_env("h1_2-velocity", n_envs=1, seed=0, config=cfg)


def test_reward_terms_count_from_their_onset_in_training_and_always_in_evaluation():
    cfg = H1_2VelocityConfig()
    cfg.randomization.enabled, cfg.penalty_curriculum.enabled = False, False
    cfg.reward_weights["yaw_oscillation"] = -0.1
    cfg.legged.reward_onset_steps = {"yaw_oscillation": 4}
    env = make_env("h1_2-velocity", n_envs=2, seed=0, config=cfg)
    env.reset()
    for _ in range(3):  # a gait-period average to swing about
        env.step(np.random.default_rng(0).uniform(-1, 1, (2, 12)))
    state, action = env.sim.state(), np.zeros((2, 12))
    assert env.task.curriculum_levels()["terms_pending"] == 0.0  # 2 envs × 3 steps ≥ 4
    env.task.reseed(1)  # restarts the count
    assert env.task.curriculum_levels()["terms_pending"] == 1.0
    assert np.all(env.task.reward(state, action)[1]["yaw_oscillation"] == 0.0)
    raw = env.task.reward_yaw_oscillation(state, action) * -0.1 * env.task.dt  # after reward() recorded the state
    assert raw.min() < 0.0
    env.task.training = False
    np.testing.assert_allclose(env.task.reward(state, action)[1]["yaw_oscillation"], raw)
    cfg.legged.reward_onset_steps = {"no_such_term": 1}
    with pytest.raises(ValueError, match="reward_onset_steps names \\['no_such_term'\\]"):
        make_env("h1_2-velocity", n_envs=1, seed=0, config=cfg)


def test_evaluation_counts_episodes_with_a_supervisor_fault_not_steps():
    from embody.policies.base import RandomPolicy
    from embody.policies.evaluate import evaluate

    cfg = H1_2VelocityConfig(max_episode_steps=10)
    cfg.randomization.enabled = False
    env = make_env("h1_2-velocity", n_envs=2, seed=0, config=cfg)
    metrics = env.task.step_metrics
    env.task.step_metrics = lambda state: {**metrics(state), "supervisor_fault": (env.task.steps == 3) * 1.0}
    result = evaluate(env, RandomPolicy(env.task.observation_size, 12), episodes=4)
    assert result.metrics["supervisor_fault"] == [1.0] * 4  # one step of ten in every episode: each episode counts
    assert result.summary()["supervisor_fault"] == 1.0


@pytest.mark.parametrize("task", ["h1_2-velocity", "h1_2-stand"])
def test_the_mirror_of_an_observation_is_the_observation_of_the_mirrored_robot(task):
    """Env 1 holds the mirror image of env 0's random state and command: its observation must be the task's
    mirror of env 0's (but the gait phase, which mirrors to half a period on, a time we cannot set)."""
    from embody.sims import InitState

    cfg = TASKS.get(task).config_class()
    cfg.randomization.enabled = False
    env = make_env(task, n_envs=2, seed=0, config=cfg)
    env.reset()
    spec, rng = env.task.robot, np.random.default_rng(1)
    partner, sign = np.array(spec.mirror_joint), np.array(spec.mirror_sign)
    q = spec.default_pose + rng.uniform(-0.1, 0.1, spec.n_joints)
    qd = rng.uniform(-1, 1, spec.n_joints)
    quat = np.array([0.99, 0.05, -0.08, 0.06]) / np.linalg.norm([0.99, 0.05, -0.08, 0.06])
    env.sim.reset(
        np.arange(2),
        InitState(
            joint_pos=np.stack([q, q[partner] * sign]),
            joint_vel=np.stack([qd, qd[partner] * sign]),
            base_pos=np.array([[0.1, 0.2, 1.3], [0.1, -0.2, 1.3]]),  # airborne: no contact forces to compare
            base_quat=np.stack([quat, quat * [1, -1, 1, -1]]),
            base_lin_vel=np.array([[0.3, 0.4, -0.1], [0.3, -0.4, -0.1]]),
            base_ang_vel=np.array([[0.5, -0.2, 0.7], [-0.5, -0.2, -0.7]]),
        ),
    )
    env.task.commands[:] = [[0.4, 0.3, -0.6], [0.4, -0.3, 0.6]]  # (stand's range is zero: no set_commands)
    state = env.sim.state()
    obs, priv = env.task.observe(state), env.task.privileged_observe(state)
    mirror = env.task.mirror()
    np.testing.assert_allclose(mirror.obs(obs[0])[:45], obs[1][:45], atol=1e-5)
    np.testing.assert_allclose(mirror.obs(obs[0])[45:47], -obs[1][45:47], atol=1e-6)
    np.testing.assert_allclose(mirror.obs(obs[0])[47:], obs[1][47:], atol=1e-5)
    np.testing.assert_allclose(mirror.privileged(priv[0]), priv[1], atol=1e-5)
    assert mirror.action(mirror.action(np.arange(12.0))).tolist() == list(range(12))  # an involution
    env.close()


def test_the_penalty_curriculum_scales_penalties_in_training_only():
    cfg = H1_2VelocityConfig()
    cfg.penalty_curriculum.enabled, cfg.penalty_curriculum.step = True, 0.1
    env = make_env("h1_2-velocity", n_envs=4, seed=0, config=cfg)
    env.reset()
    task = env.task
    assert task.curriculum_levels() == {"penalty": pytest.approx(0.1), "terms_pending": 1.0}  # the yaw swing
    a = np.random.default_rng(0).uniform(-1, 1, (4, 12))
    _, _, _, _, info = env.step(a)  # the first step: the last action was zero
    expected = 0.1 * -0.01 * 0.02 * np.mean(np.sum(a**2, axis=1))
    assert info.reward_terms["action_rate"] == pytest.approx(expected)
    assert info.reward_terms["alive"] == pytest.approx(0.15 * 0.02)  # positive terms keep their weight
    task.steps[:] = [600, 600, 600, 100]  # three episodes past up_s (10 s), one short of down_s (4 s)
    task.on_reset(np.arange(4))
    assert task.penalty_level == pytest.approx(0.3)
    task.training = False
    assert task.penalty_level == 1.0 and task.curriculum_levels() == {"penalty": 1.0, "terms_pending": 0.0}
    env.close()


def test_reward_terms_are_finite_and_weighted_per_second():
    env = velocity_env(n=8)
    env.reset()
    _, reward, _, _, info = env.step(np.random.default_rng(0).uniform(-1, 1, (8, 12)))
    assert np.isfinite(reward).all() and (reward >= 0).all()  # only_positive_rewards
    assert set(info.reward_terms) == set(env.task.config.reward_weights)
    assert info.reward_terms["alive"] == pytest.approx(0.15 * 0.02)


def test_stand_plays_motion_clips_on_the_upper_body():
    env = make_env("h1_2-stand", n_envs=3, seed=1)
    obs, _ = env.reset()
    assert obs.shape == (3, 77)
    task = env.task
    for _ in range(30):
        env.step(np.zeros((3, 12)))
    targets = task.upper_targets()
    np.testing.assert_array_equal(targets[:, task.upper], task.frames[task.clip, task.frame])
    np.testing.assert_array_equal(env.task.commands, 0.0)
    # the PD follows the clip: joints near their targets of the last step
    assert np.abs(env.sim.state().joint_pos[:, task.upper] - targets[:, task.upper]).max() < 0.5
    task.config.motion.amplitude = 0.5  # halfway between the default pose and the clip
    q0 = task.q0[task.upper]
    np.testing.assert_allclose(task.upper_targets()[:, task.upper], (q0 + task.frames[task.clip, task.frame]) / 2)


def test_stand_refuses_bad_clip_libraries(tmp_path):
    spec = get_robot("h1_2")
    cfg = H1_2StandConfig()
    cfg.motion.library = str(tmp_path / "missing")
    with pytest.raises(MotionError, match="missing"):
        make_env("h1_2-stand", n_envs=1, config=cfg)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken.safetensors").write_bytes(b"not a clip")
    cfg.motion.library = str(tmp_path / "bad")
    with pytest.raises(MotionError, match="broken.safetensors"):
        make_env("h1_2-stand", n_envs=1, config=cfg)
    (tmp_path / "foreign").mkdir()
    MotionClip(("left_wing_joint",), 50.0, np.zeros((10, 1)), label="wings").save(
        tmp_path / "foreign" / "w.safetensors"
    )
    cfg.motion.library = str(tmp_path / "foreign")
    with pytest.raises(MotionError, match="left_wing_joint"):
        make_env("h1_2-stand", n_envs=1, config=cfg)
    (tmp_path / "wild").mkdir()
    clip = generate_library(spec)[0]
    MotionClip(clip.joint_names, clip.fps, clip.joint_pos * 10, label="wild").save(tmp_path / "wild" / "w.safetensors")
    cfg.motion.library = str(tmp_path / "wild")
    with pytest.raises(MotionError, match="outside its range"):
        make_env("h1_2-stand", n_envs=1, config=cfg)


@pytest.mark.parametrize("task", ["h1_2-velocity", "h1_2-stand"])
@pytest.mark.parametrize("sim_name", SIMS)
def test_runs_on_every_simulator(task, sim_name):
    try:
        env = make_env(task, sim_name, n_envs=2, seed=0)
    except UnsupportedTask as e:  # randomization needs capabilities; without it the task must run
        assert "physics_params" in str(e) or "push" in str(e)
        cfg = (H1_2VelocityConfig if task == "h1_2-velocity" else H1_2StandConfig)()
        cfg.randomization.enabled = False
        env = make_env(task, sim_name, n_envs=2, seed=0, config=cfg)
    obs, priv = env.reset()
    for _ in range(5):
        obs, reward, *_ = env.step(np.zeros((2, env.action_size)))
    assert np.isfinite(obs).all() and np.isfinite(reward).all()
    assert abs(obs[:, 5].mean() + 1) < 0.1  # still upright after 0.1 s
    env.close()


@pytest.mark.slow
def test_short_training_beats_a_random_policy(tmp_path):
    """CI's small version of the learning bar (the full one: embody bench learning --task h1_2-velocity).
    150k steps (~1.5 min on 2 cores): the deterministic policy already collects ~2x a random policy's
    return; outliving it 5x takes ~10 minutes (benchmarks/README.md)."""
    from embody.benchmarks.learning import random_baseline
    from embody.train import resolve_config, train

    cfg = resolve_config("h1_2-velocity", overrides=["steps=150000", "max_time_s=0", "video=false", "eval_episodes=16"])
    summary = train(cfg, tmp_path / "run")
    baseline = random_baseline("h1_2-velocity", [])
    assert summary["return_mean"] > 1.3 * baseline["return_mean"], (summary, baseline)


def test_an_observation_history_stacks_past_frames_newest_first_and_clears_them_on_reset():
    cfg = H1_2VelocityConfig()
    cfg.legged.obs_history = 3
    env = make_env("h1_2-velocity", n_envs=2, seed=0, config=cfg)
    f = env.task.frame_size
    seen = [env.reset()[0]]
    assert env.observation_size == 3 * f == seen[0].shape[1] and not seen[0][:, f:].any()  # no past yet
    a = np.random.default_rng(0).uniform(-1, 1, (2, 12))
    seen += [env.step(a)[0] for _ in range(2)]
    np.testing.assert_array_equal(seen[2][:, f:], np.concatenate([seen[1][:, :f], seen[0][:, :f]], axis=1))
    one_frame = H1_2VelocityConfig()
    one_frame.legged.obs_history = 1
    single = make_env("h1_2-velocity", n_envs=1, seed=0, config=one_frame).task.mirror().obs
    np.testing.assert_array_equal(
        env.task.mirror().obs(seen[2][0]), np.concatenate([single(x[0, :f]) for x in seen[::-1]])
    )
    env.task.on_reset(np.array([1]))
    assert not env.task.obs_frames[:, 1].any() and env.task.obs_frames[:, 0].any()
    env.close()

import numpy as np

from embody.policies.evaluate import _Steps


def test_episodes_are_cut_into_whole_segments_that_never_cross_a_reset():
    steps = _Steps(2)
    for t in range(8):  # env 0: episodes of 5 and 3 steps; env 1: one of 7 steps
        obs, actions, rewards = np.array([[t, 0.0], [t, 1.0]]), np.array([[t], [-t]]), np.array([10.0 * t, -10.0 * t])
        steps.add(obs, actions, rewards, done=np.array([t in (4, 7), t == 6]))
    seg = steps.segments(2, episodes=2)  # the first two episodes to end: env 0's first, then env 1's
    assert seg["obs"][:, :, 0].tolist() == [[0, 1], [2, 3], [0, 1], [2, 3], [4, 5]]  # step 4 and step 6 left over
    assert seg["obs"][:, 0, 1].tolist() == [0, 0, 1, 1, 1]  # which env
    assert seg["actions"].shape == (5, 2, 1) and seg["rewards"][2].tolist() == [0.0, -10.0]
    assert len(steps.segments(4, episodes=3)["rewards"]) == 2 and len(steps.segments(9, episodes=3)["obs"]) == 0

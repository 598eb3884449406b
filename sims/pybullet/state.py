"""The PyBullet adapter's state: the get_state row layout, the base's two frames, saveState snapshots.

A row (s,) = [time, base inertial frame (PyBullet's base pose: centre of mass, x,y,z,w quaternion)
and its world velocities, the positions and velocities of every URDF dof, a snapshot token].
The numbers restore the state to rounding; the token names a saveState snapshot of the env
taken with the row, which restores it bit for bit (see ``Snapshots``).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from embody.rotations import quat_conj, quat_mul, quat_rotate

TIME, POS, QUAT, LIN, ANG, BASE_END = 0, slice(1, 4), slice(4, 8), slice(8, 11), slice(11, 14), 14
MAX_ABS = 1e10  # MuJoCo's mjMAXVAL: larger positions or velocities count as diverged
SAVED_STATES = 16  # per env: the latest get_state rows that restore bit-exactly through saveState
NO_TOKEN = -1.0


def wxyz(q: np.ndarray) -> np.ndarray:
    """PyBullet's x,y,z,w quaternions (..., 4) in our w,x,y,z order."""
    return q[..., [3, 0, 1, 2]]


def xyzw(q: np.ndarray) -> np.ndarray:
    """Quaternions (..., 4) w,x,y,z to PyBullet's x,y,z,w."""
    return q[..., [1, 2, 3, 0]]


class BaseFrame:
    """The base link's frame vs. PyBullet's base pose (its inertial frame): ``com_pos`` (3,) and
    ``com_quat`` (4,) w,x,y,z place the inertial frame in the link frame."""

    def __init__(self, com_pos: np.ndarray, com_quat: np.ndarray):
        self.com_pos, self.com_quat = com_pos, com_quat

    def link_to_com(self, pos: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Base link frame (n, 3), (n, 4) w,x,y,z → PyBullet's base inertial frame."""
        return pos + quat_rotate(quat, self.com_pos), quat_mul(quat, self.com_quat)

    def com_to_link(self, pos: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inverse of ``link_to_com``."""
        link = quat_mul(quat, quat_conj(self.com_quat))
        return pos - quat_rotate(link, self.com_pos), link


class Snapshots:
    """saveState snapshots named by the tokens in get_state rows: the latest SAVED_STATES per env.

    Restoring numbers alone is not exact in contact (PyBullet keeps contact points and solver
    warm-start impulses between steps); a snapshot is. Tokens start at a random offset per
    simulator, so that a row from another simulator (a recorded dataset, say) never names one of
    this simulator's snapshots; such a row restores from its numbers.
    """

    def __init__(self, p, n_envs: int):
        self.p = p
        self._saved: dict[int, tuple[int, int, int]] = {}  # token -> (env, client, PyBullet state id)
        self._recent = [deque() for _ in range(n_envs)]  # per env: its live tokens, oldest first
        self._next = int(np.random.default_rng().integers(2**51))  # tokens stay exact in a float64 row

    def save(self, env: int, client: int) -> float:
        """Snapshot env ``env`` (in ``client``); returns the token for its row."""
        token, self._next = self._next, self._next + 1
        self._saved[token] = (env, client, self.p.saveState(physicsClientId=client))
        self._recent[env].append(token)
        if len(self._recent[env]) > SAVED_STATES:
            _, c, sid = self._saved.pop(self._recent[env].popleft())
            self.p.removeState(sid, physicsClientId=c)
        return float(token)

    def restore(self, env: int, token: float) -> bool:
        """Restore env ``env`` from the snapshot ``token`` names, if it is one of that env's; says whether."""
        saved = self._saved.get(int(token)) if token >= 0 else None
        if saved is None or saved[0] != env:
            return False
        self.p.restoreState(saved[2], physicsClientId=saved[1])
        return True

    def drop(self, env: int) -> None:
        """Forget env ``env``'s snapshots (its client is gone)."""
        for token in self._recent[env]:
            del self._saved[token]
        self._recent[env].clear()

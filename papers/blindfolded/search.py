"""The search experts of the peg domain (peg.py): told a square region containing the hole (or only the
prior), they press the peg onto the board and follow a square spiral over the region until it drops in."""

from __future__ import annotations

import numpy as np
import torch

from embody.sims.tasks.peg_insert import HOLE, PRIVILEGED_SIZE, TARGET, TIP, WRENCH, PegInsertConfig, observation_size


def _square_spiral(half: float) -> tuple[np.ndarray, np.ndarray]:
    """Waypoints (K, 2) of a square spiral from the origin with unit spacing between passes (legs
    1, 1, 2, 2, 3, 3, ... going right, up, left, down) until it has covered the square of half-side
    ``half`` (units), and their cumulative path length (K,)."""
    dirs = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]], dtype=np.float64)
    pts, p, leg = [np.zeros(2)], np.zeros(2), 0
    while leg < 4 or np.abs(pts[-4:]).min(axis=1).min() <= half:
        p = p + dirs[leg % 4] * (leg // 2 + 1)
        pts.append(p.copy())
        leg += 1
    w = np.array(pts)
    return w, np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(w, axis=0), axis=1))]


class SearchExpert:
    """A blindfolded peg-insertion expert (see peg.py's module docstring): a Policy over
    cat(obs, privileged) (n, 38) → (n, 3) keeping per-env search state (region centre, progress
    along the spiral [m], touched-down flag); ``reset(env_ids)`` clears it, and the region is drawn
    (with the expert's own generator) at the first ``act`` after a reset.

    ``side``: the region's side [m], None for the prior square (blind, centred on the nominal hole).
    ``mode="slide"`` (default): slide along the spiral pressed ``press`` into the board, the
    target pulled ``gain`` × the lag ahead of the tip (friction holds a pressed peg), advancing
    ``speed`` per step while the tip is within ``tolerance`` of the spiral point, plus ``integral``
    × the tracking error summed over the slide (bounded by 4 mm·steps). Measured on MuJoCo (64 holes,
    600 steps), press 0.6 mm: region-4mm 100% in ~93 steps, region-8mm 97% in ~136, blind 89% in ~266;
    press 0.4 mm: 100% / 89% / 80%; press 0.8 mm (1 mm/step): 92% / 88% / 92% (blind 94% in 800 steps).
    Without the integral (press 0.4 mm, 32 holes): 88% / 72% / 62%: the pressed peg sticks and slips,
    lags the spiral and passes within < 0.6 mm of the hole's axis without dropping in; pressing
    harder makes it drop in from further off the axis. Blind's remaining failures at 600 steps are
    partly time (its spiral covers the 270 mm of the prior square at ~0.7 mm a step while tracking).
    ``resync`` > 0 (a DAgger teacher): when another policy drives the peg along the spiral ahead of this
    expert's own progress, skip ahead to where the tip is (the nearest point within ``resync`` metres of path
    ahead, if within half a pass of it) instead of labelling a way back to a point the peg has already passed.
    ``mode="peck"``: probe the spiral's points ``pitch`` apart: move in the air ``lift`` above the
    face, press down once within ``aim`` of the point, go on once the peg rests on the face. Sure to
    find the hole in principle, but the arm rings laterally ~0.5 mm after each move, ~8 steps a
    probe: 0-6% blind within 400 steps (kept for comparison / later tuning).
    """

    def __init__(
        self,
        config: PegInsertConfig,
        side: float | None,
        mode: str = "slide",
        pitch: float = 0.0012,
        press: float = 0.0006,
        drop: float = 0.0003,
        lift: float = 0.0006,
        aim: float = 0.0003,
        hover: float = 0.002,
        max_force: float = 25.0,
        speed: float = 0.0007,
        tolerance: float = 0.0015,
        gain: float = 2.0,
        integral: float = 0.6,
        resync: float = 0.0,
        seed: int = 0,
    ):
        if mode not in ("peck", "slide"):
            raise ValueError(f"mode must be 'peck' or 'slide', got {mode!r}")
        self.config, self.side, self.mode = config, side, mode
        self.pitch, self.press, self.drop, self.lift, self.aim = pitch, press, drop, lift, aim
        self.hover, self.max_force = hover, max_force
        self.speed, self.tolerance, self.gain, self.integral = speed, tolerance, gain, integral
        self.resync = resync
        self.obs_size, self.action_size = observation_size(config) + PRIVILEGED_SIZE, 3
        self.rng = np.random.default_rng([seed, 5])
        half = (2 * config.hole_xy_range if side is None else side) / 2
        self.way, self.cum = _square_spiral(half / pitch)
        self.way *= pitch
        self.cum *= pitch
        self.bound = config.hole_xy_range + 0.5 * pitch  # probing beyond the prior is pointless
        self.fresh: np.ndarray | None = None
        self.max_sum = 0.004  # m·steps: bound of the integrated tracking error

    def reset(self, env_ids=None) -> None:
        """Clear the search state of ``env_ids`` (all when None); their regions are drawn at the next ``act``."""
        if env_ids is None or self.fresh is None:
            self.fresh = None
        else:
            self.fresh[np.asarray(env_ids)] = True

    def _spiral(self, d: np.ndarray) -> np.ndarray:
        """(n,) path length [m] → (n, 2) offset from the centre (wrapping to restart when done)."""
        d = np.mod(d, self.cum[-1])
        return np.stack([np.interp(d, self.cum, self.way[:, 0]), np.interp(d, self.cum, self.way[:, 1])], axis=1)

    def _point(self, d: np.ndarray) -> np.ndarray:
        return np.clip(self.centre + self._spiral(d), -self.bound, self.bound)

    def _caught_up(self, xy: np.ndarray, sliding: np.ndarray) -> np.ndarray:
        """(n,) progress along the spiral: where the tip xy (n, 2) is, for ``sliding`` envs whose tip lies on the
        spiral (within half a pass) within ``resync`` of path ahead of their progress, else unchanged."""
        ahead = self.d[:, None] + np.linspace(0.0, self.resync, 33)[None]  # (n, 33)
        offsets = self._spiral(ahead.ravel()).reshape(*ahead.shape, 2)
        pts = np.clip(self.centre[:, None] + offsets, -self.bound, self.bound)
        dist = np.linalg.norm(pts - xy[:, None], axis=2)
        best = dist.argmin(axis=1)
        d_best = dist[np.arange(len(xy)), best]
        near = sliding & (d_best < self.pitch / 2) & (d_best < dist[:, 0])  # on the spiral, not beside the next pass
        return np.where(near, ahead[np.arange(len(xy)), best], self.d)

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Actions (n, 3) from cat(obs, privileged) (n, 38): touch down at the told region's centre, then search
        along a spiral, pressing down, until the peg drops in."""
        x = obs.detach().cpu().numpy().astype(np.float64)
        n, c = len(x), self.config
        if self.fresh is None or len(self.fresh) != n:
            self.fresh = np.ones(n, dtype=bool)
            self.centre, self.d, self.touched = np.zeros((n, 2)), np.zeros(n), np.zeros(n, dtype=bool)
            self.err_sum = np.zeros((n, 2))
        f = np.flatnonzero(self.fresh)
        if f.size:  # the only read of the privileged observation: the region it is told
            if self.side is not None:
                self.centre[f] = x[f, -PRIVILEGED_SIZE:][:, HOLE][:, :2] + self.rng.uniform(
                    -self.side / 2, self.side / 2, (f.size, 2)
                )
            else:
                self.centre[f] = 0.0
            self.d[f], self.touched[f], self.fresh[f], self.err_sum[f] = 0.0, False, False, 0.0
        tip = x[:, TIP]  # relative to the nominal mouth; the hole's z is not randomized: the face is at 0
        target = tip + x[:, TARGET]
        force = np.linalg.norm(x[:, WRENCH][:, :3], axis=1)
        height = tip[:, 2]
        inside = height < -self.drop
        on_face = height < 0.15e-3
        self.touched |= on_face
        goal = np.empty((n, 3))
        if self.mode == "peck":
            err = np.linalg.norm(self._point(self.d) - tip[:, :2], axis=1)
            probed = self.touched & on_face & ~inside & (err < self.aim)  # this point rests on the face
            self.d = np.where(probed, self.d + self.pitch, self.d)
            point = self._point(self.d)
            aimed = np.linalg.norm(point - tip[:, :2], axis=1) < self.aim
            goal[:, :2] = point
            goal[:, 2] = np.where(aimed, -self.press, np.where(self.touched, self.lift, self.hover))
        else:
            if self.resync > 0:
                self.d = self._caught_up(tip[:, :2], self.touched & ~inside)
            way = self._point(self.d)
            on_track = np.linalg.norm(way - tip[:, :2], axis=1) < self.tolerance
            self.d = np.where(self.touched & on_track & ~inside, self.d + self.speed, self.d)
            way = self._point(self.d)
            err = way - tip[:, :2]
            if self.integral:  # integral of the tracking error (anti-windup: bounded, only while sliding)
                self.err_sum = np.where(
                    (self.touched & ~inside)[:, None], np.clip(self.err_sum + err, -self.max_sum, self.max_sum), 0.0
                )
            lead = self.gain * err + self.integral * self.err_sum  # pull the target ahead: friction holds a pressed peg
            lead *= np.minimum(1.0, c.max_target_offset / np.maximum(np.abs(lead).max(axis=1), 1e-9))[:, None]
            above = np.linalg.norm(self.centre - tip[:, :2], axis=1) < 0.5e-3
            goal[:, :2] = np.where(self.touched[:, None], tip[:, :2] + lead, self.centre)
            goal[:, 2] = np.where(self.touched | above, -self.press, self.hover)
        goal[inside, :2] = tip[inside, :2]
        goal[inside, 2] = -c.hole_depth - 0.0005
        step = (goal - target) / c.action_scale
        step[:, 2] = np.where(inside, step[:, 2], np.maximum(step[:, 2], -np.maximum(0.2, height / 0.01)))
        step[force > self.max_force, 2] = 0.2
        return torch.as_tensor(np.clip(step, -1.0, 1.0), dtype=torch.float32)

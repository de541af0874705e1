"""
A calibrated camera and a stream of tracked frames of its board, at the observation level.

What the calibration-drift watch (:mod:`lf_mpc_calib.measurement.drift`) is checked with: the
camera of an optics preset, its exact MPC model as the truth, a calibration from ``poses``
noisy captures (the real :func:`lf_mpc_calib.calibration.calibrate`), then frames of the board
at random poses with the same corner noise, as the decode node's tracker would give them
(conventional: every corner in the views within the micro-image; focused: the micro-images
that see it, :func:`lf_mpc_calib.simulation.focused_observations.focused_observations`).

    scene = DriftScene.make('lytro', noise_px=0.1, rng=rng)
    scene.calibration            # CalibrationResult
    obs = scene.frame(rng)       # Observations of one frame (pose 0)
"""

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import InvalidInputError

VIEW_RADIUS = 3.6
"""Conventional views used: |(i, j)| <= this (37 views, the decode node's usable ones)."""
MAX_TILT_DEG = 25.0
"""Board tilts are uniform within this about x and y (a third of it about z)."""


def _views():
    i, j = np.meshgrid(np.arange(-4, 5), np.arange(-4, 5))
    keep = np.hypot(i, j) <= VIEW_RADIUS
    return np.column_stack([i[keep], j[keep]]).astype(float)


@dataclass(frozen=True, eq=False)
class DriftScene:
    """
    camera: the optics preset (simulation.optics.Camera); truth: its MPCModel; board: a
    Checkerboard; noise_px: corner noise per coordinate; calibration: the CalibrationResult
    of ``poses`` captures; image_size: (width, height) of a view (conventional) or None.
    """

    camera: object
    truth: object
    board: object
    noise_px: float
    calibration: object
    image_size: tuple = None

    @classmethod
    def make(cls, preset_name, *, noise_px, rng, poses=6):
        """Simulate the camera ``preset_name`` and calibrate it from ``poses`` captures."""
        from lf_mpc_calib.calibration import calibrate
        from lf_mpc_calib.calibration.focused import orient_focused
        from lf_mpc_calib.simulation.optics import default_board, preset
        cam = preset(preset_name)
        size = None if cam.camera_type == 'focused' else tuple(cam.lenslet_grid().shape)
        scene = cls(cam, cam.ground_truth_model(), default_board(cam), float(noise_px), None,
                    size)
        obs = Observations.concatenate([scene._capture(rng, p) for p in range(poses)])
        result = calibrate(obs, camera_type=cam.camera_type, lens_type_terms='none')
        if cam.camera_type == 'focused':
            result = orient_focused(result)
        return cls(cam, scene.truth, scene.board, scene.noise_px, result, size)

    def _capture(self, rng, pose, tries=20):
        """A frame fit for calibration: >= 4 corners seen in >= 2 rays (else drawn again)."""
        for _ in range(tries):
            obs = self.frame(rng, pose=pose)
            if np.count_nonzero(np.bincount(obs.point) >= 2) >= 4:
                return obs
        raise InvalidInputError(f'no pose of {tries} shows 4 corners in 2 rays')

    def _pose(self, rng):
        """A random board pose (rotation vector, translation) in the MPC frame."""
        cam, pts = self.camera, self.board.points()
        z = cam.scene_distance * rng.uniform(0.85, 1.15)
        if cam.camera_type == 'focused':    # away from the plane conjugate to the MLA
            z_f = 1.0 / cam.main_lens.inverse_focus
            z = cam.scene_distance * rng.uniform(0.6, 0.75) if z < 1.25 * z_f else z
        ang = np.deg2rad(rng.uniform(-MAX_TILT_DEG, MAX_TILT_DEG, 3)) * [1.0, 1.0, 0.3]
        rot = Rotation.from_euler('xyz', ang).as_matrix()
        t = np.array([0.0, 0.0, z]) - rot @ pts.mean(0)
        if cam.camera_type == 'focused':
            return cam.pose_from_physical(rot, t)
        return Rotation.from_matrix(rot).as_rotvec(), t

    def frame(self, rng, *, pose=0):
        """Observations of the board at a random pose with the scene's noise (pose id)."""
        rv, tv = self._pose(rng)
        if self.camera.camera_type == 'focused':
            from lf_mpc_calib.simulation.focused_observations import focused_observations
            obs = focused_observations(self.camera, self.board, rv[None], tv[None],
                                       noise_px=self.noise_px, rng=rng)
            return Observations(np.full(len(obs), pose), obs.point, obs.board, obs.ijuv)
        from lf_mpc_calib.simulation.observations import simulate_observations
        obs = simulate_observations(self.truth, rv[None], tv[None], self.board.points(),
                                    _views(), noise_px=self.noise_px, rng=rng,
                                    image_size=self.image_size)
        if len(obs) == 0:
            raise InvalidInputError('the simulated board is outside every view')
        return Observations(np.full(len(obs), pose), obs.point, obs.board, obs.ijuv)


def perturbed(model, change, scale=1.0):
    """``model`` with ``change`` applied: 'k_i' (+1 % x scale), 'principal point' (+1 px x
    scale in u) or 'none'."""
    if change == 'k_i':
        return model.replace(k_i=(1.0 + 0.01 * scale) * model.k_i)
    if change == 'principal point':
        return model.replace(u_0=model.u_0 - scale * model.k_u)
    if change == 'none':
        return model
    raise InvalidInputError(f"change must be 'k_i', 'principal point' or 'none', got "
                            f'{change!r}')

"""
The camera calibration of a joint hand-eye refinement, and how far it moved from the
camera-only one.

With robot poses the board pose of every capture follows from 12 parameters (mount and board
pose) instead of 6 free ones per capture, so the joint refinement of
:func:`~lf_mpc_calib.calibration.hand_eye.calibrate_hand_eye` (``refine_intrinsics=True``)
refines the intrinsics with the mount, and the mount refers to the optical frame of THOSE
intrinsics (the principal point tilts it). The calibration saved and published beside a mount
is therefore the joint one (:func:`joint_calibration`); :func:`intrinsics_shift` says how far
it moved from the camera-only calibration, in that calibration's sigmas.
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.calibration.result import CalibrationResult, error_summary
from lf_mpc_calib.camera.model import PARAMETER_NAMES
from lf_mpc_calib.errors import InvalidInputError

#: a shift of the intrinsics above this many camera-only sigmas is reported: on correct
#: simulated arms rendered as raw frames the largest shift was 0.5-3.0 sigmas (the two
#: solutions share the corner errors, and those are not all covered by the camera-only sigma)
SHIFT_WARNING_SIGMAS = 5.0


def joint_calibration(he, obs, calibration):
    """
    CalibrationResult of the joint hand-eye refinement ``he`` of ``obs`` (the observation
    table the camera-only ``calibration`` came from).

    model, stddev, covariance: those of the joint solve (parameters held by the camera-only
    calibration stay held, stddev NaN); rotation_vectors, translations (P, 3): the board poses
    C_k = M^-1 G_k^-1 B of the P captures with robot poses (pose_ids ``he.pose_ids``) and the
    error figures of their rays; fixed, held, lens_types, method: the camera-only
    calibration's; extras['camera_only']: that calibration. Raises InvalidInputError when
    ``he`` held the intrinsics (it has no joint model).
    """
    if he.model_covariance is None:
        raise InvalidInputError('the hand-eye solve held the intrinsics: there is no joint '
                                'calibration (solve it with refine_intrinsics=True)')
    rows = np.isin(obs.pose, he.pose_ids)
    rv, tv = (np.array(a, dtype=float) for a in he.optical_poses())
    summary = error_summary(he.model, obs.select(rows), rv, tv, np.asarray(he.pose_ids),
                            np.asarray(he.residuals_px)[rows])
    return CalibrationResult(
        model=he.model, initial=calibration.model, rotation_vectors=rv, translations=tv,
        pose_ids=np.array(he.pose_ids), stddev=dict(he.model_stddev),
        iterations=he.iterations, converged=he.converged, message=he.message,
        fixed=tuple(getattr(calibration, 'fixed', ())),
        method=getattr(calibration, 'method', 'exact'), loss='linear',
        cost=0.5 * float(np.nansum(np.asarray(he.residuals_px)[rows] ** 2)),
        lens_types=getattr(calibration, 'lens_types', None),
        held=dict(getattr(calibration, 'held', {}) or {}),
        covariance=np.array(he.model_covariance),
        extras={'camera_only': calibration, 'hand_eye_joint': True}, **summary)


@dataclass(frozen=True)
class IntrinsicsShift:
    """
    How far the joint calibration moved from the camera-only one.

    parameters {name: (joint - camera-only, that / camera-only sigma)} of the refined model
    parameters; principal_point_px (2,): shift of the principal point (u, v) in pixels;
    principal_point_sigmas (2,): that / the camera-only principal point's sigma; max_sigmas:
    the largest |shift| / sigma of all (NaN when no sigma is known).
    """

    parameters: dict
    principal_point_px: tuple
    principal_point_sigmas: tuple
    max_sigmas: float

    @property
    def large(self):
        """True when some figure moved by more than SHIFT_WARNING_SIGMAS sigmas."""
        return bool(self.max_sigmas > SHIFT_WARNING_SIGMAS)

    def summary(self):
        """One line: the shift of every refined parameter and of the principal point."""
        pp = self.principal_point_px
        zp = self.principal_point_sigmas
        parts = [f'{n} {d:+.3g} ({z:+.1f} sigma)' for n, (d, z) in self.parameters.items()]
        return (f'intrinsics refined jointly with the hand-eye; moved from the camera-only '
                f'calibration by at most {self.max_sigmas:.1f} sigma (its sigmas): principal '
                f'point ({pp[0]:+.3f}, {pp[1]:+.3f}) px ({zp[0]:+.1f}, {zp[1]:+.1f} sigma), '
                + ', '.join(parts))

    def to_dict(self):
        """Plain floats: {max_sigmas, principal_point_px, principal_point_sigmas,
        parameters {name: {shift, sigmas}}}."""
        return {'max_sigmas': float(self.max_sigmas),
                'principal_point_px': [float(v) for v in self.principal_point_px],
                'principal_point_sigmas': [float(v) for v in self.principal_point_sigmas],
                'parameters': {n: {'shift': float(d), 'sigmas': float(z)}
                               for n, (d, z) in self.parameters.items()}}


def intrinsics_shift(joint, camera_only):
    """:class:`IntrinsicsShift` of the ``joint`` CalibrationResult from ``camera_only``."""
    params = {}
    for name in PARAMETER_NAMES:
        if not np.isfinite(joint.stddev.get(name, np.nan)):
            continue                                # held in the joint solve
        d = float(getattr(joint.model, name) - getattr(camera_only.model, name))
        s = float(camera_only.stddev.get(name, np.nan))
        params[name] = (d, d / s if s > 0 else float('nan'))
    dpp = joint.model.principal_point - camera_only.model.principal_point
    spp = np.asarray(camera_only.principal_point_stddev(), dtype=float)
    with np.errstate(divide='ignore', invalid='ignore'):
        zpp = np.where(spp > 0, dpp / spp, np.nan)
    z = np.abs([v for _, v in params.values()] + list(zpp))
    z = z[np.isfinite(z)]
    return IntrinsicsShift(params, tuple(float(v) for v in dpp), tuple(float(v) for v in zpp),
                           float(z.max()) if len(z) else float('nan'))


def refines_intrinsics(calibration):
    """Whether the hand-eye solve refines the intrinsics of ``calibration`` jointly: not when
    it has per-micro-lens-type terms (multi-focus cameras), which the hand-eye problem does not
    model; its intrinsics are then held and the camera-only calibration is published."""
    return getattr(calibration, 'lens_types', None) is None


def attach_joint_calibration(he, obs, calibration):
    """
    Put the joint calibration of ``he`` (:func:`joint_calibration`) and its
    :func:`intrinsics_shift` from ``calibration`` into ``he.extras`` ('joint_calibration',
    'intrinsics_shift'); returns the joint CalibrationResult, or None when ``he`` held the
    intrinsics.
    """
    if he.model_covariance is None:
        return None
    joint = joint_calibration(he, obs, calibration)
    he.extras['joint_calibration'] = joint
    he.extras['intrinsics_shift'] = intrinsics_shift(joint, calibration)
    return joint


def published_result(calibration, he=None):
    """The CalibrationResult to save and publish: the joint one attached to the hand-eye
    result ``he`` (:func:`attach_joint_calibration`), else the camera-only ``calibration``."""
    if he is None:
        return calibration
    return he.extras.get('joint_calibration', calibration)

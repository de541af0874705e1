"""
Is a calibration one to accept? The one rule of ``calibrate-raw``, the calibration node and the
demo.

A calibration is accepted when all three hold:

1. the refinement converged (:func:`~lf_mpc_calib.calibration.calibrate`'s ``converged``);
2. the model explains the detections: RMS reprojection at most ``FIT_LIMIT`` x the corner
   noise the detector measured (:mod:`~lf_mpc_calib.calibration.fit_check`; checked when
   that noise is known);
3. the poses determine the camera: no sigma of k_i, k_j, k_u, k_v or the principal point over
   the accuracy aimed at (:mod:`~lf_mpc_calib.calibration.determination`).

:func:`acceptance` returns the verdict with every reason (the node keeps a session the rule
does not accept, and says so in its ``~/calibrate`` reply, on ``~/status`` and in the saved
folder's manifest); :func:`check_accepted` raises with the figures and what to do instead
(``calibrate-raw``: no file is written). The demo's verdict against the simulator's truth
says "to trust" only for an accepted calibration.
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.calibration.determination import check_determined, determination, \
    TARGET_K_PCT, TARGET_PP_PX
from lf_mpc_calib.calibration.fit_check import check_model_fit, FIT_LIMIT, NOISE_FLOOR_PX
from lf_mpc_calib.errors import ConvergenceError

RULE = 'lf_mpc_calib.calibration.acceptance'
"""Where the rule lives: named in the node's replies and the saved folder's manifest."""


@dataclass(frozen=True)
class Acceptance:
    """
    The verdict of the acceptance rule on one calibration.

    accepted: True when nothing refuses it; refusals: one line per reason (the figure and its
    limit); warnings: figures whose 3 sigma exceed the accuracy aimed at (kept, flagged);
    determination: the :class:`~lf_mpc_calib.calibration.determination.Determination`;
    fit_ratio: RMS reprojection / corner noise (nan when the noise is not known).
    """

    accepted: bool
    refusals: tuple
    warnings: tuple
    determination: object
    fit_ratio: float = float('nan')

    def summary(self):
        """One line: 'accepted' or 'NOT accepted: reason; reason', with the rule's name."""
        if self.accepted:
            return f'accepted ({RULE})'
        return f'NOT accepted ({RULE}): ' + '; '.join(self.refusals)

    def to_dict(self):
        """Plain types for JSON (``~/status``) and YAML (the saved folder's manifest)."""
        return {'accepted': bool(self.accepted), 'refusals': list(self.refusals),
                'warnings': list(self.warnings), 'rule': RULE,
                'fit_ratio': None if not np.isfinite(self.fit_ratio)
                else round(float(self.fit_ratio), 4)}


def acceptance(result, *, corner_noise_px=None, target_k_pct=TARGET_K_PCT,
               target_pp_px=TARGET_PP_PX, fit_limit=FIT_LIMIT):
    """
    The :class:`Acceptance` of a CalibrationResult.

    corner_noise_px: the detector's own corner noise (line residuals across views, or the
    micro-image fit residual of a focused camera); None skips the fit check (an observation
    table without it). target_k_pct, target_pp_px: the accuracy aimed at
    (:mod:`~lf_mpc_calib.calibration.determination`).
    """
    refusals = []
    if not result.converged:
        refusals.append(f'the refinement did not converge ({result.message})')
    ratio = float('nan')
    if corner_noise_px is not None:
        ratio = float(result.rms_reprojection_px) / max(float(corner_noise_px), NOISE_FLOOR_PX)
        if not ratio <= fit_limit:
            refusals.append(f'RMS reprojection {result.rms_reprojection_px:.3f} px is '
                            f'{ratio:.1f} x the corner noise {corner_noise_px:.3f} px (limit '
                            f'{fit_limit:g} x): the model does not explain the detections')
    d = determination(result, target_k_pct=target_k_pct, target_pp_px=target_pp_px)
    refusals += list(d.refusals)
    return Acceptance(not refusals, tuple(refusals), tuple(d.warnings), d, ratio)


def check_accepted(result, *, corner_noise_px=None, board_points=None,
                   camera_type='conventional', accept_uncertain=False):
    """
    Return the :class:`Acceptance` of ``result``; raise when the rule refuses it.

    A model that does not explain the detections: DetectionError
    (:func:`~lf_mpc_calib.calibration.fit_check.check_model_fit`, with the figures and what
    to check), always; unless ``accept_uncertain`` (the verdict is then returned, not
    accepted, and says why): a refinement that did not converge, ConvergenceError; poses that
    do not determine the camera, DegenerateConfigurationError with the poses to add
    (:func:`~lf_mpc_calib.calibration.determination.check_determined`).
    board_points (M, 3) and camera_type: for the pose advice.
    """
    verdict = acceptance(result, corner_noise_px=corner_noise_px)
    if corner_noise_px is not None:
        check_model_fit(result.rms_reprojection_px, corner_noise_px)
    if accept_uncertain:
        return verdict
    if not result.converged:
        raise ConvergenceError(
            f'the refinement did not converge after {result.iterations} iterations: '
            f'{result.message} (RMS {result.rms_reprojection_px:.3g} px)')
    check_determined(result, board_points=board_points, camera_type=camera_type)
    return verdict

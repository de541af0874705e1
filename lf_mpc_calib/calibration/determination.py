"""
Do the poses determine the camera? The calibration stage's check of its own uncertainty.

A calibration that fits the detections (:mod:`~lf_mpc_calib.calibration.fit_check`) can still
be a few per cent off when the poses leave the intrinsics weakly determined (boards near the
focus distance, where parallax across views vanishes; too little tilt; a narrow field of view).
Its honest standard deviations (:mod:`~lf_mpc_calib.calibration.refine`, cluster-robust) say
so. Against the accuracy aimed at (k_i, k_j, k_u, k_v within TARGET_K_PCT, principal point
within TARGET_PP_PX):

- sigma above the target: the poses do not determine the camera; the calibration is refused
  with the figures and the pose advice of
  :func:`~lf_mpc_calib.calibration.guidance.capture_guidance`;
- 3 sigma above the target: the result is kept but flagged (``warnings``): it may miss the
  target, by up to the 3-sigma figure given.

The sigmas are the result's: for focused calibrations the larger of the residual and the
leave-one-pose-out ones (:meth:`~lf_mpc_calib.calibration.pose_jackknife.PoseJackknife.
covering_result`): those are reported and flagged on, while the refusal stays on the residual
ones (``extras['residual_stddev']``): over 10 poses the jackknife's own spread is wide (the
new Galilean default seed 0: 0.26 px off, jackknife sigma of u 0.59 px, residual 0.28 px), so
it warns ("within +-1.77 px (3 sigma)") rather than refuses.
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.calibration.guidance import (  # noqa: F401 - the targets are named here too
    capture_guidance, DEPTH_ADVICE, FLAG_SIGMAS, TARGET_K_PCT, TARGET_PP_PX)
from lf_mpc_calib.errors import DegenerateConfigurationError

SCALES = ('k_i', 'k_j', 'k_u', 'k_v')


@dataclass(frozen=True)
class Determination:
    """
    How well a result determines the camera.

    sigma_pct {k_i, k_j, k_u, k_v: relative sigma in %}; sigma_principal_point_px (2,);
    refusals: one line per figure whose sigma exceeds the target; warnings: one line per
    figure whose 3 sigma exceeds it (and its sigma does not).
    """

    sigma_pct: dict
    sigma_principal_point_px: tuple
    refusals: tuple
    warnings: tuple

    @property
    def determined(self):
        """True when no sigma exceeds the target."""
        return not self.refusals


def determination(result, *, target_k_pct=TARGET_K_PCT, target_pp_px=TARGET_PP_PX):
    """The :class:`Determination` of a CalibrationResult against the targets."""
    def figures(stddev, pp):
        pct = [100.0 * float(stddev.get(n, np.nan)) / abs(float(getattr(result.model, n)))
               for n in SCALES]
        return ([(n, v, '%', target_k_pct) for n, v in zip(SCALES, pct)]
                + [(f'principal point {a}', float(v), 'px', target_pp_px)
                   for a, v in zip('uv', pp)])

    quoted = figures(result.stddev, result.principal_point_stddev())
    residual = figures(result.extras.get('residual_stddev', result.stddev), result.extras.get(
        'residual_principal_point_stddev_px', result.principal_point_stddev()))
    refusals, warnings = [], []
    for (name, s, unit, target), (_, s_res, _, _) in zip(quoted, residual):
        if not s_res <= target:
            refusals.append(f'sigma of {name} {s_res:.2f} {unit} (limit {target:g} {unit})')
        elif FLAG_SIGMAS * s > target:
            warnings.append(f'{name} is within +-{FLAG_SIGMAS * s:.2f} {unit} (3 sigma), more '
                            f'than the {target:g} {unit} aimed at')
    sigma = {n: s for n, s, _, _ in quoted[:4]}
    pp = tuple(s for _, s, _, _ in quoted[4:])
    return Determination(sigma, pp, tuple(refusals), tuple(warnings))


def check_determined(result, *, board_points=None, target_k_pct=TARGET_K_PCT,
                     target_pp_px=TARGET_PP_PX, camera_type='conventional'):
    """
    Return the :class:`Determination`; raise DegenerateConfigurationError when it refuses.

    The message names every figure over its limit and the poses to add (board_points (M, 3)
    of the board, for the depth advice; camera_type 'conventional' or 'focused', whose advice
    differs: :mod:`~lf_mpc_calib.calibration.guidance`).
    """
    d = determination(result, target_k_pct=target_k_pct, target_pp_px=target_pp_px)
    if d.determined:
        return d
    guide = capture_guidance(result, board_points=board_points, camera_type=camera_type)
    advice = '; '.join(guide.advice) or (
        f'add poses: boards {DEPTH_ADVICE[camera_type]}, tilted 15-30 deg about both axes')
    raise DegenerateConfigurationError(
        'calibration: the poses do not determine the camera: ' + ', '.join(d.refusals)
        + f'. To do: {advice} (or pass --accept-uncertain to write it anyway)')

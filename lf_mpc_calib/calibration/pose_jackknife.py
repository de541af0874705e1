"""
Leave-one-pose-out (jackknife) uncertainty of a calibration's intrinsics.

``CalibrationResult.stddev`` comes from the residuals: it is right when the corners' errors are
independent between board points. Errors shared by the rows of one pose are not seen there: a
detector's bias that depends on the board's depth and tilt (the aperture's cut inside defocused
micro-images, features.aperture_bias) moves every row of a pose the same way. Refitting once
without each pose measures that spread directly:

    sigma_jack^2 = (P - 1) / P * sum_p (theta_(-p) - mean_p theta_(-p))^2

(Efron's delete-one jackknife over the P poses). With independent errors it is about the
residual sigma (0.65-2.5 x, median 1.5 x, over 6 unlike poses: it is conservative); an error
shared within each pose raises it (test_pose_jackknife.py). Measured on simulated focused cameras
(benchmarks/bench_focused_raw.py, noise-free 256-ray renders): the residual sigmas understate
the errors of k and of the principal point by 2-6x where one pose carries a depth-dependent
(u, v) scale bias (Galilean, 16 x 11 board, seed 2: pp error 1.14 px, residual sigma 0.34,
jackknife 0.81), and the jackknife ones bring the errors to 0.3-1.6 of sigma (those 256-ray
renders carry a rim bias of their own that 1024-ray ones do not, features.aperture_bias). A
bias common to every pose (a wrong micro-image lattice) is invisible to both.

    jk = pose_jackknife(obs, result)          # P refits, each started from ``result``
    jk.stddev['k_u'], jk.principal_point_stddev(), jk.ratio()['u_0'], jk.most_influential()
    jk.covering_result()     # the result with each sigma the larger of the two

Focused calibrations quote the larger of the two sigmas (``covering_result``) and are flagged
on it (calibration.determination): on the default simulated focused captures the residual
sigma of the principal point left the error at up to 3.5 sigma (Galilean seed 1 at 64 rays:
1.05 px off, residual sigma (0.27, 0.30) px), the jackknife's (0.66, 0.45) px at 2.3.

Only the intrinsics (PARAMETER_NAMES that ``result`` left free) are compared; the lens-type
terms are left out because their zero-mean gauge moves with the ray fractions of each subset.
"""

from dataclasses import dataclass, replace

import numpy as np

from lf_mpc_calib.calibration.refine import refine
from lf_mpc_calib.camera.model import PARAMETER_NAMES
from lf_mpc_calib.errors import InvalidInputError

MIN_POSES = 4
SHARED_ERROR_RATIO = 3.0   # jackknife / residual sigma above which the summary warns


@dataclass(frozen=True, eq=False)
class PoseJackknife:
    """
    pose_ids (P,): the pose left out of each refit; names (F,): the free intrinsics compared;
    estimates (P, F): their values without that pose; principal_points (P, 2): the principal
    point (-u_0/k_u, -v_0/k_v) in pixels without it; converged (P,): each refit's solver
    report; full: the CalibrationResult with every pose.
    """

    pose_ids: np.ndarray
    names: tuple
    estimates: np.ndarray
    principal_points: np.ndarray
    converged: np.ndarray
    full: object

    @staticmethod
    def _spread(values):
        n = len(values)
        return np.sqrt((n - 1) / n * ((values - values.mean(0)) ** 2).sum(0))

    @property
    def stddev(self):
        """{name: jackknife standard deviation} of the free intrinsics."""
        return dict(zip(self.names, (float(s) for s in self._spread(self.estimates))))

    def principal_point_stddev(self):
        """(2,) jackknife standard deviation of the principal point, pixels."""
        return self._spread(self.principal_points)

    def ratio(self):
        """{name: jackknife sigma / residual sigma}: 0.65-2.5 (median 1.5) over 6 poses with
        independent errors (the jackknife is conservative); above SHARED_ERROR_RATIO the poses
        disagree beyond what the residuals explain (errors shared within a pose)."""
        return {n: s / self.full.stddev[n] for n, s in self.stddev.items()}

    def covering_stddev(self):
        """({name: the larger of the residual and the jackknife sigma} over the result's
        stddev, (2,) the principal point's larger sigma, px)."""
        sd = dict(self.full.stddev)
        for n, s in self.stddev.items():
            sd[n] = max(float(sd.get(n, np.nan)), s)
        pp = np.fmax(self.full.principal_point_stddev(), self.principal_point_stddev())
        return sd, pp

    def covering_result(self):
        """The full result with each compared intrinsic's sigma the larger of its residual
        and jackknife ones: stddev raised, the covariance scaled alike (its correlations
        kept), and extras['principal_point_stddev_px'] the principal point's larger sigma
        (the delta method on the scaled covariance can fall short of the jackknife's)."""
        full = self.full
        sd, pp = self.covering_stddev()
        cov = full.covariance
        if cov is not None and len(full.free_names()) == len(cov):
            gain = np.array([sd[n] / full.stddev[n] if full.stddev[n] > 0 else 1.0
                             for n in full.free_names()])
            cov = cov * np.outer(gain, gain)
        return replace(full, stddev=sd, covariance=cov,
                       extras={**full.extras, 'principal_point_stddev_px': pp,
                               'residual_stddev': dict(full.stddev),
                               'residual_principal_point_stddev_px':
                                   full.principal_point_stddev(),
                               'stddev_source': 'the larger of the residual and the '
                                                'leave-one-pose-out sigma'})

    def principal_point_shifts(self):
        """(P, 2) how far the principal point moves (px) without each pose."""
        return self.principal_points - self.full.model.principal_point

    def most_influential(self):
        """(pose id, shift (2,) px): the pose whose omission moves the principal point most."""
        shift = self.principal_point_shifts()
        k = int(np.argmax(np.hypot(*shift.T)))
        return int(self.pose_ids[k]), shift[k]

    def one_line(self):
        """The principal point's two sigmas, the largest ratio, a warning above
        SHARED_ERROR_RATIO: one line for a service answer or a log."""
        pp, sd = self.full.principal_point_stddev(), self.principal_point_stddev()
        name, worst = max(self.ratio().items(), key=lambda kv: kv[1])
        text = (f'leave-one-pose-out over {len(self.pose_ids)} poses: principal point sd '
                f'({sd[0]:.3g}, {sd[1]:.3g}) px (residuals: ({pp[0]:.3g}, {pp[1]:.3g})), '
                f'{name} sd x{worst:.1f}')
        if worst > SHARED_ERROR_RATIO:
            text += ('; WARNING: the poses disagree beyond the residual sigmas (errors shared '
                     'within a pose): quote the jackknife ones')
        return text

    def summary(self):
        """Lines for a report: each intrinsic's two sigmas, the principal point's, the pose
        that moves it most."""
        lines = [f'leave-one-pose-out over {len(self.pose_ids)} poses '
                 f'(sigma from the residuals / from the poses):']
        for n, s in self.stddev.items():
            sd = self.full.stddev[n]
            lines.append(f'  {n:4s} {getattr(self.full.model, n):+.6g}  '
                         f'sd {sd:.3g} / {s:.3g}  (x{s / sd:.1f})')
        pp, sd = self.full.principal_point_stddev(), self.principal_point_stddev()
        lines.append(f'  principal point sd ({pp[0]:.3g}, {pp[1]:.3g}) / '
                     f'({sd[0]:.3g}, {sd[1]:.3g}) px')
        pose, shift = self.most_influential()
        lines.append(f'  without pose {pose} the principal point moves most: '
                     f'({shift[0]:+.3g}, {shift[1]:+.3g}) px')
        if not self.converged.all():
            lines.append(f'  refits that did not converge: without pose(s) '
                         f'{self.pose_ids[~self.converged].tolist()}')
        worst = max(self.ratio().values())
        if worst > SHARED_ERROR_RATIO:
            lines.append(f'  the poses disagree by up to {worst:.1f}x the residual sigma: '
                         f'errors shared within a pose (depth- or tilt-dependent detection '
                         f'bias); quote the jackknife sigmas')
        return lines


def pose_jackknife(obs, result, *, loss=None, f_scale=1.0, progress=None):
    """
    Refit ``result`` once without each pose of ``obs`` (the table it was calibrated from).

    Each refit starts from ``result`` (model, the remaining poses, lens-type terms) and holds
    what it held (``fixed`` and ``held``), with the same lens-type terms and loss (``loss``:
    None for ``result.loss``; ``f_scale`` its scale, px). progress(done, total): optional
    callback after each refit. Returns a :class:`PoseJackknife`; raises InvalidInputError for
    fewer than MIN_POSES poses or a table whose poses are not the result's.
    """
    ids = np.asarray(obs.pose_ids)
    if len(ids) < MIN_POSES:
        raise InvalidInputError(f'the pose jackknife needs >= {MIN_POSES} poses, got {len(ids)}')
    if not np.array_equal(np.sort(result.pose_ids), ids):
        raise InvalidInputError(f'the table has poses {ids.tolist()}, the result '
                                f'{np.sort(result.pose_ids).tolist()}')
    held = tuple(n for n in PARAMETER_NAMES if n in set(result.fixed) | set(result.held))
    names = tuple(n for n in PARAMETER_NAMES
                  if n not in held and np.isfinite(result.stddev.get(n, np.nan)))
    terms = 'none' if result.lens_types is None else result.lens_types.terms
    estimates, pps, converged = [], [], []
    for k, pose in enumerate(ids):
        keep = result.pose_ids != pose
        start = replace(result, rotation_vectors=result.rotation_vectors[keep],
                        translations=result.translations[keep], pose_ids=result.pose_ids[keep])
        fit = refine(obs.select(obs.pose != pose), start, fix=held,
                     loss=loss or result.loss, f_scale=f_scale, lens_type_terms=terms)
        estimates.append([getattr(fit.model, n) for n in names])
        pps.append(fit.model.principal_point)
        converged.append(fit.converged)
        if progress is not None:
            progress(k + 1, len(ids))
    return PoseJackknife(ids, names, np.array(estimates, float), np.array(pps),
                         np.array(converged, bool), result)

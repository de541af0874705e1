"""
Has an intrinsic moved? A targeted test of a tracked board's residuals, beside the RMS test.

The RMS test (:mod:`lf_mpc_calib.measurement.drift`) weighs every direction of the residuals
alike, so a change the board's pose almost absorbs (a principal point 1 px off leaves 0.01 px
on corners of 0.1 px noise) stays inside its limit. This test looks only along the directions
an intrinsic moves the corners and the pose cannot follow. Per frame, with the pose fitted and
the intrinsics theta held (``names``, e.g. the calibration covariance's free parameters):

    J = d(predicted pixels) / d(theta), made orthogonal to d(predicted) / d(pose),
    g = J^T r,   H = J^T J          (r: measured - predicted, px; per coordinate)

Over a window, G = sum g and W = sum H. If the true intrinsics are theta + delta, G = W delta
+ noise, with delta itself uncertain by the calibration's covariance S (the right calibration
is off the truth by its own error) and the noise of covariance sigma^2 W (sigma^2 = rms_cal^2
/ 2 per coordinate), so that

    T = G^T (sigma^2 W + W S W)^+ G

follows a chi-square law of rank(W) degrees of freedom with the right calibration, however
many frames. A change of several of the calibration's own sigmas raises T without bound as
frames add up; one within them cannot be told from the calibration's own error by any test,
and this one does not try. The window is *beyond* when T exceeds the chi-square quantile of
``false_alarm``; *drifting* with at least ``min_frames`` frames.

    watch = ScoreWatch(names, covariance, rms_cal)
    summary = watch.add(frame_score(obs, model, names))     # ScoreSummary
"""

from collections import deque
from dataclasses import dataclass

import numpy as np
from scipy import stats

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.measurement.drift import DriftNews, FALSE_ALARM, MIN_FRAMES, WINDOW

RELATIVE_STEP = 1e-6
"""Step of the numerical derivatives, relative to each parameter (absolute for 0)."""


def frame_score(obs, model, names, *, terms=None):
    """
    (g (P,), H (P, P)) of one frame's Observations under ``model`` (MPCModel) for the
    intrinsics ``names`` (P,): the residuals projected on what each moves that the board's
    fitted pose cannot (module docstring). terms: a focused camera's LensTypeTerms or None.
    Raises DegenerateConfigurationError as :func:`drift.frame_residuals` does.
    """
    from scipy.spatial.transform import Rotation

    from lf_mpc_calib.calibration.board_pose import fit_pose_residuals
    from lf_mpc_calib.camera.observations import Observations
    if terms is not None:
        obs = Observations(obs.pose, obs.point, obs.board,
                           terms.corrected_ijuv(obs.ijuv, obs.lens_type))
    rv, tv, r = fit_pose_residuals(obs, model)
    ij = obs.ijuv[:, :2]

    def predicted(m, x):
        pts = Rotation.from_rotvec(x[:3]).apply(obs.board) + x[3:]
        return m.project(pts, ij).ravel()

    pose = np.concatenate([rv, tv])
    jp = np.column_stack([_derivative(lambda h, k=k: predicted(model, pose + h * np.eye(6)[k]),
                                      1e-7) for k in range(6)])
    jt = []
    for name in names:
        value = float(getattr(model, name))
        step = RELATIVE_STEP * (abs(value) if value else 1.0)
        jt.append(_derivative(
            lambda h, name=name, value=value: predicted(model.replace(**{name: value + h}),
                                                        pose), step))
    jt = np.column_stack(jt)
    q, _ = np.linalg.qr(jp)
    jt = jt - q @ (q.T @ jt)                     # what the pose cannot follow
    return jt.T @ r.ravel(), jt.T @ jt


def _derivative(f, step):
    """Central difference (f(step) - f(-step)) / (2 step) of a vector function of h."""
    return (f(step) - f(-step)) / (2.0 * step)


@dataclass(frozen=True, eq=False)
class ScoreSummary:
    """
    The window's figures after a frame: frames; statistic T and its degrees of freedom; limit
    (the chi-square quantile of false_alarm); p_value; beyond, drifting as the module says;
    largest: the parameter the window moves most in the calibration's sigmas, and by how many
    (the window's own estimate of the change, W^+ G, in units of sqrt(S_pp)); beyond_frames
    and news as :class:`lf_mpc_calib.measurement.drift.DriftSummary`'s.
    """

    frames: int
    statistic: float
    dof: int
    limit: float
    p_value: float
    beyond: bool
    drifting: bool
    largest: str
    largest_sigmas: float
    beyond_frames: int = 0
    news: bool = False

    def as_dict(self):
        """Plain mapping for ~/stats (floats rounded to 4 significant digits)."""
        return {k: float(f'{v:.4g}') if isinstance(v, float) else v
                for k, v in self.__dict__.items()}

    def message(self):
        """The problem's text: which intrinsic the frames say moved, and how far."""
        return (f'calibration drift: the tracked corners say {self.largest} moved '
                f'{self.largest_sigmas:+.1f} sigma of the calibration (statistic '
                f'{self.statistic:.3g} against {self.limit:.3g} over {self.frames} frames, '
                f'p = {self.p_value:.2g})')


class ScoreWatch:
    """
    Sliding-window targeted test (module docstring). names (P,): the intrinsics tested;
    covariance (P, P): the calibration's covariance of them (symmetric, >= 0);
    calibration_rms_px: its ``rms_reprojection_px``. Feed with :meth:`add`.
    """

    def __init__(self, names, covariance, calibration_rms_px, *, window=WINDOW,
                 min_frames=MIN_FRAMES, false_alarm=FALSE_ALARM):
        cov = np.asarray(covariance, dtype=float)
        names = tuple(names)
        if cov.shape != (len(names), len(names)) or not np.all(np.isfinite(cov)):
            raise InvalidInputError(f'covariance must be {len(names)} x {len(names)} finite '
                                    f'numbers for {names}, got shape {cov.shape}')
        rms = float(calibration_rms_px)
        if not (np.isfinite(rms) and rms > 0):
            raise InvalidInputError(f'calibration RMS must be a number > 0 px, got {rms}')
        if not 1 <= int(min_frames) <= int(window) or not 0 < float(false_alarm) < 1:
            raise InvalidInputError(f'need 1 <= min_frames <= window and 0 < false_alarm < 1, '
                                    f'got {min_frames}, {window}, {false_alarm}')
        self.names, self.cov = names, 0.5 * (cov + cov.T)
        self.sigma2 = rms ** 2 / 2.0
        self.min_frames, self.false_alarm = int(min_frames), float(false_alarm)
        self._frames = deque(maxlen=int(window))
        self._news = DriftNews()
        self.summary = None

    def reset(self):
        """Forget the window (a new calibration or board)."""
        self._frames.clear()
        self._news.reset()
        self.summary = None

    def add(self, score):
        """Feed one frame's (g, H) from :func:`frame_score`; returns the ScoreSummary."""
        g, h = (np.asarray(a, dtype=float) for a in score)
        p = len(self.names)
        finite = np.all(np.isfinite(g)) and np.all(np.isfinite(h))
        if g.shape != (p,) or h.shape != (p, p) or not finite:
            raise InvalidInputError(f'score must be g ({p},) and H ({p}, {p}) finite, got '
                                    f'{g.shape} and {h.shape}')
        self._frames.append((g, h))
        G = sum(f[0] for f in self._frames)
        W = sum(f[1] for f in self._frames)
        sd = np.sqrt(np.maximum(np.diag(self.cov), 1e-300))    # in the calibration's sigmas
        Gn, Wn = G * sd, W * np.outer(sd, sd)
        t, dof = _statistic(Gn, self.sigma2 * Wn + Wn @ (self.cov / np.outer(sd, sd)) @ Wn)
        limit = float(stats.chi2.isf(self.false_alarm, dof)) if dof else np.inf
        beyond = bool(dof and t > limit)
        name, sigmas = self._largest(G, W)
        drifting = beyond and len(self._frames) >= self.min_frames
        news = self._news.update(beyond, drifting)
        self.summary = ScoreSummary(
            frames=len(self._frames), statistic=float(t), dof=int(dof), limit=limit,
            p_value=float(stats.chi2.sf(t, dof)) if dof else 1.0, beyond=beyond,
            drifting=drifting, largest=name, largest_sigmas=float(sigmas),
            beyond_frames=self._news.beyond_frames, news=news)
        return self.summary

    def _largest(self, G, W):
        """The parameter the window's estimate W^+ G moves most, in the calibration's sigmas."""
        change = np.linalg.pinv(W, rcond=1e-10, hermitian=True) @ G
        sd = np.sqrt(np.maximum(np.diag(self.cov), 1e-300))
        k = int(np.argmax(np.abs(change) / sd))
        return self.names[k], change[k] / sd[k]


def _statistic(G, C):
    """(G^T C^+ G, rank of C) on C's well-determined eigen-directions (symmetric C)."""
    vals, vecs = np.linalg.eigh(0.5 * (C + C.T))
    keep = vals > 1e-10 * max(vals.max(), 0.0) if vals.size and vals.max() > 0 else vals > 1
    proj = vecs[:, keep].T @ G
    return float(np.sum(proj ** 2 / vals[keep])), int(np.count_nonzero(keep))


__all__ = ['ScoreSummary', 'ScoreWatch', 'frame_score']

"""
Is the calibration still right? The residual of a tracked board over a sliding window.

Every frame in which the board is found, its pose is fitted with the intrinsics held
(:func:`frame_residuals`: six pose parameters, least squares on the reprojection error) and
the residuals of its n corner rays (measured - predicted pixel) feed a :class:`DriftWatch`.
With the right calibration they are the corner noise the calibration itself saw: per
coordinate sigma^2 = rms_cal^2 / 2 (``rms_reprojection_px`` of the calibration file is the
RMS of |r| over its rays). Over the last ``window`` frames,

    s^2 = sum |r|^2 / d_win,   d_win = sum over frames of (2 n - 6),

and s^2 / (rms_cal^2 / 2) follows an F distribution with (d_win, d_cal) degrees of freedom,
d_cal those of the calibration (its rays x 2 - its unknowns; when not known, estimated as its
poses x the window's mean rays per frame x 2 - (6 x poses + 10): the calibration saw the same
board with the same views). The window is *beyond* the limit when that ratio exceeds the
F quantile of ``false_alarm`` (probability that a window of the right calibration is beyond
it) and the calibration *drifts* when a window of at least ``min_frames`` frames is beyond.
The same limit as an RMS comparable with the calibration's:
limit_px = rms_cal sqrt(F_crit d_win / (2 N_win)), N_win the window's rays.

A ray counts with |r| at most CLIP_SIGMA sigma (``clipped`` counts those cut), so that a
mislabelled corner or a tracking glitch cannot name a drift alone: with the right calibration
that cut changes the expected sum by a fraction exp(-CLIP_SIGMA^2 / 2) = 4e-6, while a ray of a
drifted calibration is rarely that far out, and when all are the window is far beyond anyway.

    watch = DriftWatch(rms_cal, calibration_poses=P)
    summary = watch.add(frame_residuals(obs, model))     # DriftSummary, frozen
    summary.drifting, summary.message()
"""

from collections import deque
from dataclasses import dataclass

import numpy as np
from scipy import stats

from lf_mpc_calib.errors import InvalidInputError

WINDOW = 20
"""Frames in the sliding window."""
MIN_FRAMES = 10
"""Frames the window needs before it can name a drift."""
FALSE_ALARM = 1e-4
"""Probability that a window of the right calibration is beyond the limit."""
CLIP_SIGMA = 5.0
"""A ray's |r| counts at most this many sigma (per coordinate) in the window's sum."""
POSE_DOF = 6
"""Parameters fitted per frame (the board pose)."""
MODEL_DOF = 10
"""Parameters of the calibrated model (intrinsics and distortion)."""


def frame_residuals(obs, model, *, terms=None):
    """
    Residuals (N, 2) px, measured - predicted, of one frame's Observations under ``model``
    (MPCModel, held) with the board's pose fitted; terms: a focused camera's LensTypeTerms
    (rows corrected by their lens type first) or None. Raises DegenerateConfigurationError
    when fewer than 4 corners are seen in two rays.
    """
    from lf_mpc_calib.calibration.board_pose import fit_pose_residuals
    from lf_mpc_calib.camera.observations import Observations
    if terms is not None:
        if obs.lens_type is None:
            raise InvalidInputError('lens-type terms need the lens_type column of the '
                                    'observations, got none')
        obs = Observations(obs.pose, obs.point, obs.board,
                           terms.corrected_ijuv(obs.ijuv, obs.lens_type))
    return fit_pose_residuals(obs, model)[2]


@dataclass(frozen=True, eq=False)
class DriftSummary:
    """
    The window's figures after a frame (module docstring).

    frames: frames in the window; rays: N_win; residual_px: sqrt(sum |r|^2 / N_win), the
    window's RMS (|r| clipped at CLIP_SIGMA sigma); clipped: rays of the window so clipped;
    frame_px: the last frame's RMS (not clipped); calibration_px: rms_cal; expected_px: the
    window RMS the right calibration gives on average, rms_cal sqrt(d_win / (2 N_win));
    limit_px; p_value: probability of a ratio this high with the right calibration;
    beyond: the window is beyond the limit; drifting: and has at least min_frames frames;
    beyond_frames: frames in a row after which the window was beyond; news: drifting, and
    for the first time or twice as many beyond_frames as at the last news (when to say it
    again without saying it every frame).
    """

    frames: int
    rays: int
    residual_px: float
    clipped: int
    frame_px: float
    calibration_px: float
    expected_px: float
    limit_px: float
    p_value: float
    beyond: bool
    drifting: bool
    beyond_frames: int
    news: bool = False

    def as_dict(self):
        """Plain mapping for ~/stats (floats rounded to 4 significant digits)."""
        out = {}
        for key, value in self.__dict__.items():
            out[key] = float(f'{value:.4g}') if isinstance(value, float) else value
        return out

    def message(self):
        """The problem's text, e.g. 'calibration drift: residual 0.61 px against ...'."""
        return (f'calibration drift: residual {self.residual_px:.3g} px against '
                f'{self.calibration_px:.3g} px at calibration, {self.beyond_frames} frames '
                f'(limit {self.limit_px:.3g} px over the last {self.frames} frames, '
                f'p = {self.p_value:.2g})')


class DriftNews:
    """Frames in a row a window was beyond its limit (``beyond_frames``), and when to name the
    drift: at its onset, then each time that run has doubled since it was last named."""

    def __init__(self):
        self.reset()

    def reset(self):
        """A new run: nothing beyond, nothing named."""
        self.beyond_frames = self._told = 0

    def update(self, beyond, drifting):
        """Count this frame's window (beyond: bool; drifting: beyond with enough frames);
        returns whether the drift is (re)named on it."""
        self.beyond_frames = self.beyond_frames + 1 if beyond else 0
        news = drifting and (self._told == 0 or self.beyond_frames >= 2 * self._told)
        self._told = self.beyond_frames if news else (self._told if drifting else 0)
        return news


class DriftWatch:
    """
    Sliding-window test of per-frame residuals against the calibration's RMS.

    calibration_rms_px: ``rms_reprojection_px`` of the calibration (> 0); calibration_dof:
    its degrees of freedom (rays x 2 - unknowns) when known, else estimated from
    ``calibration_poses`` (module docstring; at least 1); window, min_frames: frames;
    false_alarm: in (0, 1). Feed it with :meth:`add`; not thread-safe.
    """

    def __init__(self, calibration_rms_px, *, calibration_dof=None, calibration_poses=1,
                 window=WINDOW, min_frames=MIN_FRAMES, false_alarm=FALSE_ALARM):
        rms = float(calibration_rms_px)
        if not (np.isfinite(rms) and rms > 0):
            raise InvalidInputError(f'calibration RMS must be a number > 0 px, got {rms}')
        if not 1 <= int(min_frames) <= int(window):
            raise InvalidInputError(f'need 1 <= min_frames <= window, got {min_frames}, '
                                    f'{window}')
        if not 0.0 < float(false_alarm) < 1.0:
            raise InvalidInputError(f'false_alarm must be in (0, 1), got {false_alarm}')
        if calibration_dof is None and int(calibration_poses) < 1:
            raise InvalidInputError(f'calibration_poses must be >= 1, got {calibration_poses}')
        self.rms, self.window, self.min_frames = rms, int(window), int(min_frames)
        self.false_alarm = float(false_alarm)
        self.calibration_dof = None if calibration_dof is None else float(calibration_dof)
        self.calibration_poses = int(calibration_poses)
        self._frames = deque(maxlen=self.window)   # (sum of clipped |r|^2, rays, clipped)
        self._news = DriftNews()
        self.summary = None

    def reset(self):
        """Forget the window (e.g. a new calibration or board)."""
        self._frames.clear()
        self._news.reset()
        self.summary = None

    def _dof_cal(self, rays_per_frame):
        if self.calibration_dof is not None:
            return self.calibration_dof
        p = self.calibration_poses
        return max(2.0 * p * rays_per_frame - POSE_DOF * p - MODEL_DOF, 1.0)

    def add(self, residuals):
        """Feed one frame's residuals (N, 2) px (N > 3); returns the DriftSummary."""
        r = np.asarray(residuals, dtype=float)
        if r.ndim != 2 or r.shape[1] != 2 or r.shape[0] * 2 <= POSE_DOF:
            raise InvalidInputError(f'residuals must have shape (N, 2) with N > 3, got '
                                    f'{r.shape}')
        if not np.all(np.isfinite(r)):
            raise InvalidInputError('residuals contain NaN or inf')
        r2 = np.sum(r * r, axis=1)
        cap = CLIP_SIGMA ** 2 * self.rms ** 2 / 2.0
        self._frames.append((float(np.sum(np.minimum(r2, cap))), r.shape[0],
                             int(np.count_nonzero(r2 > cap))))
        sq = sum(f[0] for f in self._frames)
        rays = sum(f[1] for f in self._frames)
        frames = len(self._frames)
        d_win = 2.0 * rays - POSE_DOF * frames
        d_cal = self._dof_cal(rays / frames)
        ratio = (sq / d_win) / (self.rms ** 2 / 2.0)
        f_crit = float(stats.f.isf(self.false_alarm, d_win, d_cal))
        beyond = ratio > f_crit
        drifting = bool(beyond and frames >= self.min_frames)
        news = self._news.update(beyond, drifting)
        self.summary = DriftSummary(
            frames=frames, rays=int(rays), residual_px=float(np.sqrt(sq / rays)),
            clipped=sum(f[2] for f in self._frames), frame_px=float(np.sqrt(np.mean(r2))),
            calibration_px=self.rms, expected_px=self.rms * float(np.sqrt(d_win / (2 * rays))),
            limit_px=self.rms * float(np.sqrt(f_crit * d_win / (2 * rays))),
            p_value=float(stats.f.sf(ratio, d_win, d_cal)), beyond=bool(beyond),
            drifting=drifting, beyond_frames=self._news.beyond_frames, news=news)
        return self.summary


__all__ = ['CLIP_SIGMA', 'DriftNews', 'DriftSummary', 'DriftWatch', 'FALSE_ALARM', 'MIN_FRAMES',
           'WINDOW', 'frame_residuals']

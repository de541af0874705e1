"""
The decode node's watch of its calibration: the RMS test of every camera
(:mod:`lf_mpc_calib.measurement.drift`) and, for a conventional camera whose calibration file
keeps its covariance, the targeted test of the intrinsics (:mod:`.drift_score`).

The targeted test is left out for focused cameras: their model leaves the corners of the
right calibration a systematic 0.009 px (the detection's depth-dependent bias and the lens
types' unmodelled terms, benchmarks/bench_drift.py ``clean``), which it adds up into false
alarms within 300 frames; conventional cameras leave 0.002 px, their calibration's own error.

    watch = CalibrationWatch(cal)                   # a CalibrationFile
    summary = watch.add(observations, model, terms=None)
    summary.news, summary.beyond, summary.message(), summary.as_dict()
"""

from dataclasses import dataclass

from lf_mpc_calib.measurement.drift import DriftWatch, frame_residuals
from lf_mpc_calib.measurement.drift_score import ScoreWatch, frame_score


@dataclass(frozen=True, eq=False)
class WatchSummary:
    """The two tests' summaries after a frame (``score`` None when not run)."""

    rms: object
    score: object = None

    @property
    def beyond(self):
        return self.rms.beyond or bool(self.score is not None and self.score.beyond)

    @property
    def news(self):
        return self.rms.news or bool(self.score is not None and self.score.news)

    def message(self):
        """The drifting test's text (the RMS test's when both)."""
        if self.rms.drifting or self.score is None or not self.score.drifting:
            return self.rms.message()
        return self.score.message()

    def as_dict(self):
        """The RMS test's figures, with the targeted test's under ``intrinsics``."""
        out = self.rms.as_dict()
        if self.score is not None:
            out['intrinsics'] = self.score.as_dict()
        return out


class CalibrationWatch:
    """Both tests on one calibration file (module docstring); not thread-safe."""

    def __init__(self, calibration):
        rms = calibration.errors['rms_reprojection_px']
        self.rms = DriftWatch(rms, calibration_poses=max(calibration.num_poses, 1))
        self.score, self.names = None, ()
        cov = calibration.covariance_matrix()
        if calibration.camera_type == 'conventional' and cov is not None:
            self.names = cov[0]
            self.score = ScoreWatch(cov[0], cov[1], rms)
        self.summary = None

    def add(self, observations, model, *, terms=None):
        """Feed one frame's Observations (one pose) under ``model``; the WatchSummary.
        Raises DegenerateConfigurationError when the board's pose cannot be fitted."""
        rms = self.rms.add(frame_residuals(observations, model, terms=terms))
        score = None
        if self.score is not None:
            score = self.score.add(frame_score(observations, model, self.names, terms=terms))
        self.summary = WatchSummary(rms, score)
        return self.summary


__all__ = ['CalibrationWatch', 'WatchSummary']

"""
The feature-detector interface: one image (decoded light field or raw frame) -> observations.

A detector turns what one board pose produced into rows of the observation table for that
pose plus diagnostics for the report. Conventional cameras decode the raw frame into
sub-aperture views first (:class:`lf_mpc_calib.features.corners.ViewCornerDetector`);
a focused-camera detector takes the raw frame and the micro-image grid instead and plugs in
the same way. A detector raises :class:`lf_mpc_calib.errors.DetectionError` (with the reason)
when the board is not found; the pipeline skips that pose with a warning.
"""

from dataclasses import dataclass, field

import numpy as np

from lf_mpc_calib.camera.observations import Observations

try:  # Python >= 3.8
    from typing import Protocol
except ImportError:  # pragma: no cover
    Protocol = object


@dataclass(frozen=True, eq=False)
class Detection:
    """
    What a detector found for one board pose.

    observations: the rows for this pose (pose index as given to ``detect``).
    central_uv: (cols*rows, 2) corner pixels in the reference image (central view for
    conventional cameras), NaN where a corner was not found; for overlays in the report.
    reference_image: the image ``central_uv`` refers to (2-D float), or None.
    diagnostics: free-form numbers (counts, fit residuals, timings) for the report.
    """

    observations: Observations
    central_uv: np.ndarray
    reference_image: np.ndarray = None
    diagnostics: dict = field(default_factory=dict)

    @property
    def n_observations(self):
        """Number of rows (rays) found."""
        return len(self.observations)


class FeatureDetector(Protocol):
    """
    Anything with ``detect(data, board, *, pose=0) -> Detection``.

    ``data`` is what the detector needs for one pose (a decoded light field for
    conventional cameras, a raw frame for focused ones); ``board`` a
    :class:`lf_mpc_calib.camera.board.Checkerboard`.
    """

    def detect(self, data, board, *, pose=0):  # pragma: no cover - protocol
        """Return a :class:`Detection` or raise DetectionError naming the reason."""
        ...

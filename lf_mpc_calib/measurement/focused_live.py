"""
The focused camera's rendered total-focus image at camera rate.

Today's path (:meth:`lf_mpc_calib.measurement.focused.FocusedMeasurer.measure`) normalises the
whole frame, re-estimates the global inverse virtual depth w by a disparity search (about 70 %
of its time) and builds the render's index maps from the lattice every frame. Here:

- the index maps (one ``cv2.remap`` per frame, vectorised over micro-images) are built once per
  w, on the grid of w that the search itself resolves (0.005), and cached;
- w is checked only every ``w_every`` frames, or when the frame changed (the mean absolute
  difference of a 64 x 48 thumbnail of the normalised frame against the one at the last check
  above ``change``): by walking the disparity cost downhill from the cached w
  (:meth:`MicroImageCornerDetector.refine_w`, 3-5 evaluations of the cost instead of the 70 of
  the whole search). The whole range is searched on the first frame, when the thumbnail moved
  by more than ``jump`` (a new scene) or when the walk does not end nearby;
- the normalising scale (99th percentile of the lit pixels) is taken over every ``stride``-th
  lit pixel.

With the same w the image is today's up to the scale's subsampling (measured by
``benchmarks/bench_focused_live.py``).

    renderer = LiveCenterRenderer(detector)             # a MicroImageCornerDetector
    center, w = renderer.render(img (H, W) float)       # (h, w) f32 in [0, 1]
    renderer.w_estimates, renderer.w_refines            # whole-range searches, local walks
"""

import cv2
import numpy as np

from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.features.micro_image_corners import W_FINE_STEP as W_STEP
THUMB = (64, 48)


class LiveCenterRenderer:
    """
    Render focused raw frames with cached index maps and a cached virtual depth.

    detector: the MicroImageCornerDetector of the calibration's grid and white; w_every: frames
    between two estimates of w at most; change: thumbnail change (normalised units) that forces
    a check of w (a local walk); jump: thumbnail change that forces the whole search; stride:
    subsampling of the lit pixels for the normalising scale.
    """

    def __init__(self, detector, *, w_every=30, change=0.03, jump=0.15, stride=61, max_maps=8):
        self.det = detector
        self.w_every, self.change, self.max_maps = int(w_every), float(change), int(max_maps)
        self.jump = float(jump)
        self.shape = detector.white_normalised.shape
        self._inv_white = detector.white_gain
        self._lit_sample = np.flatnonzero(detector.lit.ravel())[::int(stride)]
        if self._lit_sample.size == 0:
            raise DetectionError('the white has no lit pixels: no micro-images to render')
        self._maps = {}
        self.w = None
        self._since = 0
        self._thumb = None
        self.w_estimates = self.w_refines = 0

    def normalise(self, img):
        """(H, W) raw frame, float or uint8 / uint16 (the result does not depend on the scale)
        -> normalised f32 frame (as MicroImageCornerDetector.normalise)."""
        if img.shape != self.shape:
            raise InvalidInputError(f'the frame is {img.shape[1]} x {img.shape[0]}, the white '
                                    f'and calibration are {self.shape[1]} x {self.shape[0]}')
        if img.dtype.kind == 'f':
            img = img.astype(np.float32, copy=False)
        sample = img.ravel()[self._lit_sample] * self._inv_white.ravel()[self._lit_sample]
        k = int(0.99 * (sample.size - 1))
        top = float(np.partition(sample, k)[k])
        if not top > 0:
            raise DetectionError('the raw frame is black inside the micro-images')
        return cv2.multiply(img, self._inv_white, scale=1.0 / top, dtype=cv2.CV_32F)

    def update_w(self, norm):
        """The cached w, checked or estimated again when due (see the module docstring)."""
        thumb = cv2.resize(norm, THUMB, interpolation=cv2.INTER_AREA)
        moved = np.inf if self._thumb is None else float(np.mean(np.abs(thumb - self._thumb)))
        if self.w is None or moved > self.change or self._since >= self.w_every:
            w = None
            if self.w is not None and moved <= self.jump:
                w = self.det.refine_w(norm, self.w)
                self.w_refines += 1
            if w is None:
                w = self.det.estimate_w(norm)
                self.w_estimates += 1
            self.w = round(w / W_STEP) * W_STEP
            self._thumb, self._since = thumb, 0
        self._since += 1
        return self.w

    def maps(self, w):
        """(map_x, map_y) f32 of the image rendered at w; off-lattice pixels map outside."""
        key = round(w / W_STEP)
        if key not in self._maps:
            if len(self._maps) >= self.max_maps:
                self._maps.pop(next(iter(self._maps)))
            self._maps[key] = self._build_maps(key * W_STEP)
        return self._maps[key]

    def _build_maps(self, w):
        step = 1.0 / abs(w)
        h, wd = self.shape
        gx = np.arange(0, wd / step, dtype=np.float32) * step
        gy = np.arange(0, h / step, dtype=np.float32) * step
        xx, yy = np.meshgrid(gx, gy)
        xy = np.column_stack([xx.ravel(), yy.ravel()]).astype(np.float64)
        nb = self.det.lattice.nearest(xy)
        c = self.det.centres[np.maximum(nb, 0)]
        q = c + w * (c - xy)
        q[nb < 0] = -10.0       # outside the frame: the constant border (0), as today's mask
        return (q[:, 0].reshape(xx.shape).astype(np.float32),
                q[:, 1].reshape(xx.shape).astype(np.float32))

    def render(self, img):
        """(H, W) float raw frame -> (rendered image (h, w) f32 in [0, 1], w)."""
        return self.render_normalised(self.normalise(img))

    def render_normalised(self, norm):
        """Normalised frame (:meth:`normalise`) -> (rendered image (h, w) f32 in [0, 1], w)."""
        w = self.update_w(norm)
        mx, my = self.maps(w)
        out = cv2.remap(norm, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                        borderValue=0)
        np.clip(out, 0.0, 1.0, out=out)
        return out, w

"""
The rays of a focused camera's raw pixels, for the decode node's ``~/rays``.

A focused camera's calibration maps a raw pixel q of the micro-image with centre c to the
indexed pixel (i, j, u, v) = (c, q - c) (lens-type terms applied on multi-focus cameras) and
the MPC model gives its ray (:func:`lf_mpc_calib.measurement.focused.raw_pixel_rays`). The
decimated set: in the micro-images whose lattice indices k and l are both multiples of
``lens_step``, every ``ray_step``-th pixel each way counted from the pixel nearest the centre,
those lit on the white (under the micro-image) and nearest to that centre. The geometry is
computed once per calibration and white (vectorised over micro-images); a frame only gathers
the intensities.

    rays = FocusedRays(detector, model, ray_step=8, lens_step=4, types=None, terms=None)
    rays.pixels (R, 2) int (column, row); rays.ray_set(raw (H, W), scale) -> live.RaySet
"""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.nearest import raw_pixel_ijuv


class FocusedRays:
    """
    The decimated raw pixels of a focused camera and their rays (module docstring).

    detector: the MicroImageCornerDetector of the calibration's grid and white (its lattice and
    lit pixels); model: the calibrated MPCModel; ray_step, lens_step >= 1; types (M,) and
    terms: the lens type of every micro-image and the LensTypeTerms (multi-focus), or None.
    Attributes: pixels (R, 2) int (column, row); ijuv (R, 4) the indexed pixels given to the
    model; origins (R, 3) (s, t, 0) m; directions (R, 3) unit vectors along (x^u, y^u, 1).
    """

    def __init__(self, detector, model, *, ray_step=8, lens_step=4, types=None, terms=None):
        if int(ray_step) < 1 or int(lens_step) < 1:
            raise InvalidInputError(f'ray_step and lens_step must be >= 1, got {ray_step}, '
                                    f'{lens_step}')
        self.ray_step, self.lens_step = int(ray_step), int(lens_step)
        lattice = detector.lattice
        lit = detector.lit
        self._gain = detector.white_gain
        cols = lattice.cols
        idx = np.arange(len(lattice.centres))
        lenses = idx[(idx % cols % self.lens_step == 0) & (idx // cols % self.lens_step == 0)]
        reach = int(np.ceil(0.5 * max(lattice.grid.pitch, lattice.grid.row_spacing))) + 1
        steps = np.arange(-(reach // self.ray_step) * self.ray_step, reach + 1, self.ray_step)
        dy, dx = np.meshgrid(steps, steps, indexing='ij')
        base = np.rint(lattice.centres[lenses]).astype(np.int64)             # (L, 2)
        px = (base[:, None, 0] + dx.ravel()[None]).ravel()                    # (L O,)
        py = (base[:, None, 1] + dy.ravel()[None]).ravel()
        owner = np.repeat(lenses, dx.size)
        h, w = lit.shape
        ok = (px >= 0) & (px < w) & (py >= 0) & (py < h)
        px, py, owner = px[ok], py[ok], owner[ok]
        ok = lit[py, px]
        px, py, owner = px[ok], py[ok], owner[ok]
        ok = lattice.nearest(np.column_stack([px, py]).astype(float)) == owner
        px, py, owner = px[ok], py[ok], owner[ok]
        self.pixels = np.column_stack([px, py])
        ijuv = raw_pixel_ijuv(lattice.centres, self.pixels, owner, types=types, terms=terms)
        rays = model.rays(ijuv) if len(ijuv) else np.zeros((0, 4))
        self.ijuv = ijuv
        self.origins = np.column_stack([rays[:, 0], rays[:, 1], np.zeros(len(rays))])
        d = np.column_stack([rays[:, 2], rays[:, 3], np.ones(len(rays))])
        self.directions = d / np.linalg.norm(d, axis=1, keepdims=True)
        self._flat = py * w + px

    def __len__(self):
        return len(self._flat)

    def ray_set(self, raw, scale):
        """
        The RaySet of a raw frame (H, W) (the white's size): intensity = the pixel over
        ``scale`` (the frame's full scale) divided by the white's relative brightness there
        (devignetted), clipped to [0, 1].
        """
        from lf_mpc_calib.measurement.live import RaySet
        raw = np.asarray(raw)
        if raw.shape[:2] != self._gain.shape:
            raise InvalidInputError(f'the frame is {raw.shape[1]} x {raw.shape[0]}, the white '
                                    f'is {self._gain.shape[1]} x {self._gain.shape[0]}')
        values = raw.reshape(-1)[self._flat].astype(np.float32)
        values *= self._gain.reshape(-1)[self._flat] / np.float32(scale)
        np.clip(values, 0.0, 1.0, out=values)
        return RaySet(self.origins, self.directions, values, self.ijuv)

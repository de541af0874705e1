"""
Depth of a focused (plenoptic 2.0) camera's raw frame from the disparity between neighbouring
micro-images, in the pixels of the image rendered from them, at camera rate.

A scene point at inverse virtual depth w_P is seen in micro-image c at c + w_P (c - x) and in
its neighbour c + e shifted by w_P e; the shift that best matches a micro-image with its
neighbours gives its w_P, and the calibrated model its depth: Eq. 11 and 18 give
w_P = -k_i (1 / Z + k_3) / k_u for a point at Z in the MPC frame, and the rendered image's
pinhole (:func:`lf_mpc_calib.measurement.focused.rendered_pinhole`) sits at the main lens, so
its depth is Z - C_z. Micro-images without texture, or whose match does not single out one
shift inside the searched window, are unknown (NaN): never a guessed value.

Multi-focus cameras (the detector's ``lens_types``, T > 1): lens types differ in focus and in
scale (:mod:`lf_mpc_calib.calibration.type_terms`), so only micro-images of one type are
compared (nearest and second-nearest lattice neighbours of the same type), the type's terms
map its measured disparity to the model's, w = ((1 + a_T) w_T + kappa_T) / (1 + g_T) (the
'-radial' terms, a distortion of the micro-images about their centres, are not applied), and
every micro-image takes the depth of the best-focused types around it: of itself and its
nearest neighbours, the types whose textured micro-images are sharpest (mean squared Laplacian
over variance near their centres; FOCUS_RATIO) give the median of their confident w; none:
unknown.

Vectorised over micro-images: the lattice is regular, so every neighbour pair of one direction
is shifted by the same vector. Each frame samples the disk of every micro-image once into an
(M, K) array (one ``cv2.remap``) and, per lattice direction (3 on a hex lattice, 2 on a square
one; each pair's cost serves both its micro-images) and candidate w, the neighbours' disks
shifted by w e (one ``cv2.remap`` of precomputed maps plus the shift). The candidates are a
window of ``SPAN`` around the frame's global w (the rendered image's, cached by
:class:`lf_mpc_calib.measurement.focused_live.LiveCenterRenderer`) in steps of ``W_STEP``; a
parabola through the best three refines the minimum.

    depth = MicroImageDepth(detector, terms=None)           # index maps, once per white
    w = depth.micro_image_w(norm (H, W) f32, w_global)      # (M,) NaN where unknown
    img = depth.depth_image(norm, model, w_render, size)    # (rows, cols) f32 metres
"""

import numpy as np
import cv2

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.features.sampling import disk_offsets

W_STEP = 0.03
"""Step of the inverse virtual depths tried (refined by a parabola through the best three)."""
SPAN = 0.12
"""Half width of the window of w searched around the frame's global w."""
MIN_TEXTURE = 0.05
"""Least standard deviation (of the normalised frame) of a micro-image with a depth."""
TEXTURE_RADIUS = 0.5
"""Part of the micro-image radius whose texture gives it a depth (the rest sees beyond its
tile in the rendered image: a board edge there would bleed its depth onto the background)."""
MIN_CONFIDENCE = 0.5
"""Least 1 - best cost / median cost (over the window) of a micro-image with a depth."""
CORE = 0.45
"""Largest radius compared, in micro-image radii (the rims, vignetted and defocused, bias the
match: 1.3-3.9 % of depth on the Keplerian preset with the whole usable disk, 0.5-0.6 % with
its centre)."""
CHECKERBOARD = True
"""Compare every other disk pixel (a checkerboard: the texture is smoother than a pixel)."""
MIN_OFFSETS = 8
"""Fewest disk samples a comparison of two micro-images may rest on."""
FOCUS_RATIO = 0.5
"""Multi-focus: lens types whose micro-images around a micro-image are at least this sharp
relative to the sharpest type's give its depth (the best-focused type, and those nearly as
sharp where focus ranges overlap; on the multi-focus preset's planes, 0.57 % median error
against 0.66 % with the sharpest type alone and 0.51 % with all three)."""


class MicroImageDepth:
    """
    Per-micro-image inverse virtual depth and the rendered image's depth, with index maps built
    once per detector (a MicroImageCornerDetector: the calibration's grid and white, with the
    lens type of every micro-image on a multi-focus camera); terms: the calibration's
    :class:`~lf_mpc_calib.calibration.type_terms.LensTypeTerms` (None: the types' disparities
    taken as the model's).
    """

    def __init__(self, detector, *, terms=None, step=W_STEP, span=SPAN):
        self.det = detector
        self.step, self.span = float(step), float(span)
        self.shape = detector.white_normalised.shape
        self.r_in, inside = detector.inner_disks_inside(self.shape)
        self.inside = np.nonzero(inside)[0]
        cen = detector.centres[self.inside]
        grid = detector.grid
        rv, cv = np.asarray(grid.row_vector, float), np.asarray(grid.column_vector, float)
        hexa = grid.lattice == 'hex'
        nearest = [rv, 0.5 * rv + cv, -0.5 * rv + cv] if hexa else [rv, cv]
        types = detector.lens_types
        self.types = None if types is None else np.asarray(types, np.int64)[self.inside]
        self.multi = self.types is not None and np.unique(self.types).size > 1
        if terms is not None and types is None:
            raise InvalidInputError('lens-type terms need the lens type of every micro-image '
                                    '(the detector has none)')
        second = ([1.5 * rv + cv, -1.5 * rv + cv, 2.0 * cv] if hexa else [rv + cv, rv - cv])
        where = np.full(len(detector.centres), -1)
        where[self.inside] = np.arange(len(self.inside))
        self.steps, self.pairs = [], []     # per direction: e, (a, b) positions in self.inside
        near_pairs = []
        for e in nearest + (second if self.multi else []):
            nb = detector.lattice.nearest(cen + e)
            nb = np.where(nb >= 0, where[np.maximum(nb, 0)], -1)
            a = np.nonzero(nb >= 0)[0]
            b = nb[a]
            if len(near_pairs) < len(nearest):
                near_pairs.append((a, b))
            if self.multi:                  # one lens type: the same focus and scale
                same = self.types[a] == self.types[b]
                a, b = a[same], b[same]
            if a.size:
                self.steps.append(e)
                self.pairs.append((a, b))
        self._cen = cen.astype(np.float32)
        core = disk_offsets(TEXTURE_RADIUS * self.r_in, 1.0).astype(np.float32)
        self._core_maps = (self._cen[:, 0:1] + core[None, :, 0],
                           self._cen[:, 1:2] + core[None, :, 1])
        self._offsets = {}
        self._nearest = {}
        self._scale = self._shift = None
        if terms is not None:
            t = terms.check_types(self.types)
            self._scale = (1.0 + terms.scale[t]) / (1.0 + terms.view_scale[t])
            self._shift = terms.slope[t] / (1.0 + terms.view_scale[t])
        if self.multi:                      # each micro-image and its nearest neighbours
            region = [np.arange(len(self.inside))]
            for a, b in near_pairs:
                fwd = np.full(len(self.inside), -1)
                back = np.full(len(self.inside), -1)
                fwd[a], back[b] = b, a
                region += [fwd, back]
            self._region = np.column_stack(region)

    def _maps(self, cands):
        """Per direction e: the (x, y) maps (len(inside), K) f32 of the points p of a disk
        centred half way between a micro-image's centre and its neighbour's shifted by
        -w e (w the middle of ``cands``), as wide as keeps p and p + w e for all w of
        ``cands`` inside r_in, at most CORE r_in; cached per window."""
        key = (round(cands[0] / 1e-4), round(cands[-1] / 1e-4))
        if key not in self._offsets:
            if len(self._offsets) >= 16:
                self._offsets.pop(next(iter(self._offsets)))
            w_mid, half = 0.5 * (cands[0] + cands[-1]), 0.5 * (cands[-1] - cands[0])
            maps = []
            for e in self.steps:
                radius = min(self.r_in - (0.5 * abs(w_mid) + half) * np.hypot(*e),
                             CORE * self.r_in)
                o = disk_offsets(max(radius, 0.0), 1.0)
                o = o[(o.sum(axis=1) % 2 == 0) | (not CHECKERBOARD)] - 0.5 * w_mid * e
                o = o.astype(np.float32)
                maps.append((self._cen[:, 0:1] + o[None, :, 0], self._cen[:, 1:2] + o[None, :, 1]))
            self._offsets[key] = maps
        return self._offsets[key]

    def candidates(self, w_global):
        """The w tried (N,) around ``w_global``, all on its side of 0."""
        n = int(round(self.span / self.step))
        cands = w_global + self.step * np.arange(-n, n + 1)
        return cands[np.sign(cands) == np.sign(w_global)]

    def _core(self, img):
        """(len(inside), K) f32: ``img`` near every micro-image's centre (TEXTURE_RADIUS)."""
        return cv2.remap(img, *self._core_maps, cv2.INTER_LINEAR,
                         borderMode=cv2.BORDER_REPLICATE)

    def textured(self, norm):
        """(len(inside),) bool: micro-images with texture near their centre (MIN_TEXTURE)."""
        return self._core(norm).std(axis=1) > MIN_TEXTURE

    def sharpness(self, norm, core=None):
        """(len(inside),) mean squared Laplacian / variance of the micro-images near their
        centres (TEXTURE_RADIUS; ``core``: :meth:`_core` of ``norm`` when at hand): larger
        where the micro-lens is better focused."""
        core = self._core(norm) if core is None else core
        lap = self._core(cv2.Laplacian(norm, cv2.CV_32F, ksize=1))
        with np.errstate(invalid='ignore', divide='ignore'):
            return np.mean(lap * lap, axis=1) / core.var(axis=1)

    def micro_image_w(self, norm, w_global):
        """
        Inverse virtual depth (M,) of the calibrated model of every micro-image of the detector
        in ``norm`` (its normalised frame, (H, W) f32), NaN where unknown; searched within SPAN
        of ``w_global`` (multi-focus: the best-focused type's, module docstring).
        """
        if norm.shape != self.shape:
            raise InvalidInputError(f'the frame is {norm.shape[1]} x {norm.shape[0]}, the white '
                                    f'is {self.shape[1]} x {self.shape[0]}')
        out = np.full(len(self.det.centres), np.nan)
        cands = self.candidates(float(w_global))
        if len(cands) < 3 or not self.inside.size:
            return out
        norm = np.ascontiguousarray(norm, np.float32)
        core = self._core(norm)
        textured = core.std(axis=1) > MIN_TEXTURE
        cost = np.zeros((len(cands), len(self.inside)))
        count = np.zeros(len(self.inside))
        for e, (a, b), (mx, my) in zip(self.steps, self.pairs, self._maps(cands)):
            use = textured[a] | textured[b]
            a, b = a[use], b[use]
            if not a.size or mx.shape[1] < MIN_OFFSETS:
                continue
            va = cv2.remap(norm, mx[a], my[a], cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_REPLICATE)
            bx, by = mx[b], my[b]
            for k, wc in enumerate(cands):
                vb = cv2.remap(norm, bx + np.float32(wc * e[0]), by + np.float32(wc * e[1]),
                               cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
                vb -= va
                c = np.einsum('ij,ij->i', vb, vb) / mx.shape[1]
                cost[k, a] += c
                cost[k, b] += c
            count[a] += 1
            count[b] += 1
        have = textured & (count > 0)
        if not have.any():
            return out
        cost = cost[:, have] / count[have]
        best = np.argmin(cost, axis=0)
        cols = np.arange(cost.shape[1])
        c0 = cost[best, cols]
        with np.errstate(invalid='ignore', divide='ignore'):
            conf = 1.0 - c0 / np.median(cost, axis=0)
        inner = (best > 0) & (best < len(cands) - 1)
        cm = cost[np.maximum(best - 1, 0), cols]
        cp = cost[np.minimum(best + 1, len(cands) - 1), cols]
        den = cm - 2 * c0 + cp
        with np.errstate(invalid='ignore', divide='ignore'):
            frac = np.where(inner & (den > 0), 0.5 * (cm - cp) / den, 0.0)
        w = cands[best] + np.clip(frac, -0.5, 0.5) * self.step
        good = inner & (conf >= MIN_CONFIDENCE)
        w_in = np.full(len(self.inside), np.nan)
        w_in[np.nonzero(have)[0][good]] = w[good]
        if self._scale is not None:         # the type's disparity -> the model's
            w_in = self._scale * w_in + self._shift
        if self.multi:
            w_in = self._best_focused(w_in, textured, self.sharpness(norm, core))
        out[self.inside] = w_in
        return out

    def _best_focused(self, w_in, textured, sharp):
        """(len(inside),) w of the best-focused types around each textured micro-image: the
        median of their confident w in its region (NaN when they have none)."""
        reg = self._region
        ok = reg >= 0
        r = np.maximum(reg, 0)
        t = self.types[r]
        s = np.where(ok & textured[r] & np.isfinite(sharp[r]), sharp[r], 0.0)
        n_types = int(self.types.max()) + 1
        score = np.zeros((len(reg), n_types))
        for k in range(n_types):
            m = (t == k) & (s > 0)
            score[:, k] = np.where(m, s, 0.0).sum(axis=1) / np.maximum(m.sum(axis=1), 1)
        focused = score >= FOCUS_RATIO * score.max(axis=1, keepdims=True)
        use = ok & np.take_along_axis(focused, t, axis=1) & (score.max(axis=1) > 0)[:, None]
        vals = np.where(use, w_in[r], np.nan)
        out = np.full(len(reg), np.nan)
        have = textured & np.isfinite(vals).any(axis=1)
        out[have] = np.nanmedian(vals[have], axis=1)
        return out

    def depth_image(self, norm, model, w_render, size):
        """
        Depth image (rows, cols) = size[::-1] float32 in the pixels of the image rendered at
        ``w_render`` (:meth:`MicroImageCornerDetector.render`), metres along the rendered
        pinhole's optical axis, NaN where unknown; ``model`` the calibration's MPCModel.
        """
        if model.k_i == 0.0 or model.k_3 == 0.0 or model.k_4 == 0.0 or w_render == 0.0:
            raise InvalidInputError(f'focused depth needs k_i, k_3, k_4 and w != 0, got k_i = '
                                    f'{model.k_i}, k_3 = {model.k_3}, k_4 = {model.k_4}, '
                                    f'w = {w_render}')
        w = self.micro_image_w(norm, w_render)
        with np.errstate(invalid='ignore', divide='ignore'):
            inv_z = -w * model.k_u / model.k_i - model.k_3
            z = 1.0 / inv_z
        centre_z = -0.5 * (1.0 / model.k_3 + 1.0 / model.k_4)
        depth = z - centre_z
        depth[~(depth > 0)] = np.nan
        nb = self.nearest(w_render, size)
        out = np.where(nb >= 0, depth[np.maximum(nb, 0)], np.nan)
        return out.astype(np.float32)

    def nearest(self, w_render, size):
        """Micro-image (rows, cols) int of each rendered pixel (-1 off the lattice); cached."""
        width, height = (int(v) for v in size)
        key = (round(float(w_render), 9), width, height)
        if key not in self._nearest:
            if len(self._nearest) >= 8:
                self._nearest.pop(next(iter(self._nearest)))
            step = 1.0 / abs(w_render)
            xx, yy = np.meshgrid(np.arange(width) * step, np.arange(height) * step)
            nb = self.det.lattice.nearest(np.column_stack([xx.ravel(), yy.ravel()]))
            self._nearest[key] = nb.reshape(height, width)
        return self._nearest[key]

"""
Conventional (plenoptic 1.0) or focused (plenoptic 2.0)? Told from a white image and a frame.

A conventional camera focuses the main lens on the micro-lenses: each micro-image is an image
of the main-lens aperture and is nearly uniform for a board near focus (one scene point per
micro-image; the scene varies between micro-images). A focused camera's micro-lenses image the
main lens's intermediate image: each micro-image holds a small sharp image of the scene, so
board edges cross the inside of micro-images. The measure: among the micro-images that see
the board's contrast (their neighbourhood spans it), the share whose own inner disk (0.6 of
the lit radius, clear of the vignetted rim) holds at least half of that contrast. Simulated
focused frames at 0.6-1.5 x their scene distance measure 0.45-0.85 (0 at the plane conjugate
to the micro-lenses), Lytro/Illum frames 0 at their focus distance but 0.2-0.6 far from it (a
defocused conventional camera is locally a focused one), hence the median over frames in
:func:`camera_type_of`, with the micro-image pitch (consumer conventional cameras 10-15 px,
focused ones 20-40 px) for undecided figures. The white image alone does not tell them apart
(the rim of the micro-image disk is as soft, relative to the pitch, in both).
"""

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import map_coordinates
from scipy.spatial import cKDTree

from lf_mpc_calib.errors import DetectionError

FOCUSED_SHARE = 0.3      # at or above: focused
CONVENTIONAL_SHARE = 0.15  # below: conventional; between: undecided
PITCH_FOCUSED = 18.0       # px: undecided shares, auto: focused from this pitch on
PITCH_CONVENTIONAL = 16.0  # px: smaller micro-images are a conventional camera's


@dataclass(frozen=True)
class CameraTypeEvidence:
    """What the decision rests on: pitch (px), lit radius (px), edge share (0..1), samples."""

    pitch_px: float
    radius_px: float
    edge_share: float
    micro_images: int

    @property
    def camera_type(self):
        """'focused', 'conventional' or None (undecided)."""
        if self.pitch_px < PITCH_CONVENTIONAL:
            return 'conventional'
        if self.edge_share >= FOCUSED_SHARE:
            return 'focused'
        if self.edge_share < CONVENTIONAL_SHARE:
            return 'conventional'
        return None

    def describe(self):
        """One line with the figures and the limits."""
        return (f'micro-image pitch {self.pitch_px:.1f} px, radius {self.radius_px:.1f} px; '
                f'{100 * self.edge_share:.0f} % of the {self.micro_images} micro-images that '
                f'see the board hold its edges inside them (focused >= '
                f'{100 * FOCUSED_SHARE:.0f} %, conventional < {100 * CONVENTIONAL_SHARE:.0f} % '
                f'or a pitch under {PITCH_CONVENTIONAL:g} px)')


def camera_type_evidence(white, grid, frame):
    """CameraTypeEvidence of a raw ``frame`` (H, W) with its ``white`` (H, W) and LensletGrid."""
    white = np.asarray(white, np.float32)
    frame = np.asarray(frame, np.float32)
    top = float(np.percentile(white, 99.5))
    if not top > 0:
        raise DetectionError('the white image is black: cannot tell the camera type')
    lit = white > 0.35 * top
    h, w = white.shape
    share = lit[h // 4:3 * h // 4, w // 4:3 * w // 4].mean()
    radius = float(np.sqrt(share * grid.pitch * grid.row_spacing / np.pi))
    norm = np.where(lit, frame / np.maximum(white, 1e-6), 0.0).astype(np.float32)
    cen = grid.centres()
    r_in = 0.6 * radius
    ok = ((cen[:, 0] > radius + 1) & (cen[:, 1] > radius + 1)
          & (cen[:, 0] < w - radius - 2) & (cen[:, 1] < h - radius - 2))
    cen = cen[ok]
    if len(cen) < 20:
        raise DetectionError(f'only {len(cen)} whole micro-images: cannot tell the camera type')
    n = int(np.floor(r_in))
    g = np.arange(-n, n + 1, dtype=float)
    xx, yy = np.meshgrid(g, g)
    d = np.column_stack([xx.ravel(), yy.ravel()])
    d = d[np.hypot(*d.T) <= r_in]
    pts = (cen[:, None, :] + d[None]).reshape(-1, 2).astype(np.float32)
    vals = map_coordinates(norm, [pts[:, 1], pts[:, 0]], order=1).reshape(len(cen), len(d))
    lo, hi = np.percentile(vals, (10, 90), axis=1)
    inner = hi - lo
    # the contrast a micro-image's neighbourhood spans (its own and its 6-8 neighbours' means)
    means = vals.mean(axis=1)
    tree_r = 1.6 * max(grid.pitch, grid.row_spacing)
    nbrs = cKDTree(cen).query_ball_point(cen, tree_r)
    span = np.array([np.ptp(np.concatenate([[means[k]], means[nb], lo[nb], hi[nb]]))
                     for k, nb in enumerate(nbrs)])
    board = float(np.percentile(span, 95))
    if not board > 0:
        raise DetectionError('the frame shows no contrast in its micro-images: cannot tell '
                             'the camera type (no board?)')
    sees = span > 0.5 * board
    if sees.sum() < 10:
        raise DetectionError('too few micro-images see contrast: cannot tell the camera type')
    edge_share = float(np.mean(inner[sees] > 0.5 * span[sees]))
    return CameraTypeEvidence(float(grid.pitch), radius, edge_share, int(sees.sum()))


def camera_type_of(white, grid, frames, claimed='auto', *, max_frames=5):
    """
    The camera type ('conventional' | 'focused') from a white image, its grid and raw frames.

    The median edge share of up to ``max_frames`` frames that show the board decides (a
    conventional camera's board far from focus looks focused in that frame, and a focused
    camera's board near the plane conjugate to the micro-lenses looks conventional; a data set
    spans depths). claimed: 'auto', or the type the user gave: refused (DetectionError with the
    figures) when the frames clearly show the other. Undecided figures: the micro-image pitch
    decides for 'auto' (>= 18 px focused), a claim stands. Returns (type, evidence list).
    """
    evidence = []
    for frame in frames:
        try:
            evidence.append(camera_type_evidence(white, grid, frame))
        except DetectionError:
            continue
        if len(evidence) >= max_frames:
            break
    if not evidence:
        if claimed != 'auto':
            return claimed, []
        raise DetectionError('no frame shows a board in its micro-images: cannot tell the '
                             'camera type; give --camera-type')
    share = float(np.median([e.edge_share for e in evidence]))
    summary = CameraTypeEvidence(evidence[0].pitch_px, evidence[0].radius_px, share,
                                 int(np.median([e.micro_images for e in evidence])))
    found = summary.camera_type
    text = f'{summary.describe()} (median of {len(evidence)} frames)'
    if claimed == 'auto':
        if found is None:
            found = 'focused' if summary.pitch_px >= PITCH_FOCUSED else 'conventional'
        return found, evidence
    if found is not None and found != claimed:
        raise DetectionError(
            f'the frames look like a {found} camera, not {claimed}: {text}; give '
            f'--camera-type {found} (or auto) if that is the camera')
    return claimed, evidence

"""
Pictures of what a calibration session sees (:mod:`lf_mpc_calib.report.detections_overlay`):
live, from any raw frame, and of each capture, from the capture's own detection.

- :func:`live_picture`: the reference image of a raw frame (the central view of a conventional
  camera, decoded alone; the image rendered from the micro-images of a focused one at the
  frame's inverse virtual depth) with the board found by the quick look
  (:func:`lf_mpc_calib.features.quick_corners.quick_corners`), every captured pose's outline
  and the guidance. Tens of ms at Lytro size (``benchmarks/bench_detections.py``).
- :func:`capture_picture`: a kept pose's reference image and the corners the capture found
  (``Detection.central_uv``: no second detection), with the same outlines and guidance.

With a ChArUco board (partial views count) both also draw each corner's id and tint the image
regions no captured corner has reached yet (:func:`uncovered_names` says which), and the live
picture the markers read with their ids (:func:`lf_mpc_calib.features.quick_corners.
quick_charuco`: the board found in part, or why not: markers of another board).

Both read the session without changing it; the caller serialises them with captures.
"""

import numpy as np

from lf_mpc_calib.errors import DetectionError
from lf_mpc_calib.features.quick_corners import quick_corners
from lf_mpc_calib.io.images import as_float_image
from lf_mpc_calib.report.detections_overlay import draw_detections


def _step_of(detection):
    """Raw pixels per reference pixel of a Detection (focused: its render step; else 1)."""
    return float(detection.diagnostics.get('render_step_px', 1.0))


def reference_image(session, raw):
    """
    (image (rows, cols) float32, step): the central view of ``raw`` (conventional) or the image
    rendered from its micro-images (focused; step: raw px per rendered px, at the frame's
    inverse virtual depth, else at the last capture's). Raises InvalidInputError for a frame
    that does not match the white image.
    """
    img = as_float_image(raw, 'raw')
    if session.camera_type != 'focused':
        view = np.asarray(session.decoder.central_view(img), dtype=np.float32)
        return (view.mean(axis=-1) if view.ndim == 3 else view), 1.0
    md = session.decoder.detector
    norm = md.normalise(img.mean(axis=2) if img.ndim == 3 else img)
    try:
        w = md.estimate_w(norm)
    except DetectionError:          # no texture: render at the last capture's depth
        done = [d.diagnostics['inverse_virtual_depth'] for d in session.detections]
        w = done[-1] if done else float(np.mean(md.options.w_range))
    image, step = md.render(norm, w)
    return image, float(step)


def captured_outlines(session, step=1.0):
    """The corners (C, 2) of every kept pose in reference pixels of step ``step``, NaN where
    not found (:func:`~lf_mpc_calib.report.detections_overlay.draw_detections` outlines)."""
    return [np.asarray(d.central_uv, float) * (_step_of(d) / step)
            for d in list(session.detections)]


def live_picture(session, raw, lines=(), suggested=None):
    """The (H, W, 3) uint8 RGB picture of one raw frame (module docstring); ``lines``: the
    guidance (:func:`~lf_mpc_calib.report.detections_overlay.guidance_lines`); suggested
    (C, 2): the suggested board's corners in the central view (px), or None."""
    image, step = reference_image(session, raw)
    look = quick_corners(image, session.board)
    n = session.board.n_points
    status = (f'live: board found, {look.found}/{n} corners' if not look.reason else
              f'live: {look.reason}')
    outlines = captured_outlines(session, step)
    extra = {}
    if _partial_views(session.board):
        status += '' if look.marker_ids is None else f' ({len(look.marker_ids)} markers read)'
        extra, lines = _partial_marks(image.shape, outlines, lines)
        extra['markers'] = None if look.marker_ids is None else (look.marker_ids,
                                                                 look.marker_corners)
    return draw_detections(image, look.corners, board_size=(session.board.cols,
                                                            session.board.rows),
                           outlines=outlines, status=status, lines=lines,
                           suggested=None if suggested is None else
                           np.asarray(suggested, float) / step, **extra)


def uncovered_names(session):
    """Names of the image regions (3 x 3 cells, report.detections_overlay.REGION_NAMES) that
    no corner of a kept pose has reached yet; [] before the first capture."""
    from lf_mpc_calib.report.detections_overlay import region_names, uncovered_regions
    if not session.detections or session.view_size is None:
        return []
    points = np.concatenate([o.reshape(-1, 2) for o in captured_outlines(session, 1.0)])
    width, height = session.view_size
    return region_names(uncovered_regions(points, (height, width)))


def _partial_views(board):
    """Whether ``board`` counts partly out of view (a ChArUco board: markers name corners)."""
    return getattr(board, 'board_type', 'checkerboard') == 'charuco'


def _partial_marks(shape, outlines, lines):
    """({corner_ids, uncovered} of draw_detections, lines with the regions the captured
    corners (``outlines``) have not reached yet first) for a board seen in part."""
    from lf_mpc_calib.report.detections_overlay import region_names, uncovered_regions
    points = np.concatenate([np.asarray(o, float).reshape(-1, 2) for o in outlines]) \
        if outlines else np.empty((0, 2))
    mask = uncovered_regions(points, shape)
    names = region_names(mask)
    head = [f'no corner captured yet (tinted): {", ".join(names)}'] if names and \
        len(names) < 9 else []
    return {'corner_ids': True, 'uncovered': mask if len(names) < 9 else None}, \
        head + list(lines)


def capture_picture(session, pose, lines=()):
    """The picture of kept pose ``pose`` from its detection (module docstring), or None when
    the detection has no reference image."""
    det = session.detections[pose]
    if det.reference_image is None:
        return None
    d = det.diagnostics
    status = (f'pose {pose} captured: {d.get("corners_found", "?")}/'
              f'{d.get("corners_total", "?")} corners')
    if 'views_used' in d:
        status += f' in {d["views_used"]} views'
    outlines = captured_outlines(session, _step_of(det))
    extra = {}
    if _partial_views(session.board):
        extra, lines = _partial_marks(np.shape(det.reference_image), outlines, lines)
    return draw_detections(det.reference_image, det.central_uv,
                           board_size=(session.board.cols, session.board.rows),
                           outlines=outlines, status=status, lines=lines, **extra)


__all__ = ['capture_picture', 'captured_outlines', 'live_picture', 'reference_image',
           'uncovered_names']

"""
``lf-mpc-calib depth RAW --calibration CAL -o OUT.npy``: metric depth of the central view.

    lf-mpc-calib depth RAW --calibration CAL [--white WHITE] -o OUT.npy [--png OUT.png]
        [--ply OUT.ply] [--near M --far M] [--view-step 1] [--window 5]
        [--min-confidence 0.3] [--views 9x9] [--truth DEPTH.npy]

Decodes RAW with the calibration's lenslet grid and white image (--white; default white.png
beside RAW), estimates the depth of the rectified central view by a plane sweep through the
calibrated MPC model (:mod:`lf_mpc_calib.measurement.depth`) and writes OUT.npy (float32
metres along the optical axis, NaN where unknown); --png: a 16-bit PNG in millimetres
(0 = unknown) and beside it OUT_preview.png (colour map); --ply: the point cloud in the optical
frame with intensity and confidence; --truth: print the error against a ground-truth depth
(``simulate --scene planes`` writes them).

A focused camera's calibration: the depth of the image rendered from the micro-images
(:class:`lf_mpc_calib.measurement.focused_depth.MicroImageDepth`, metres along the rendered
pinhole's axis, searched within 0.12 of the rendered w; the ``~/depth`` of the decode node) at
--render-w (default: the frame's own w; ``simulate --preset focused-* --scene planes`` writes
its depth truth at the manifest's ``render_w``); --views, --near/--far, --view-step,
--window and --min-confidence do not apply.
"""

from pathlib import Path
import re
import sys
import time

from lf_mpc_calib.cli.numbers import integer, real


def register(subparsers):
    """Add the ``depth`` subcommand."""
    p = subparsers.add_parser(
        'depth', help='metric depth of the central view of a raw frame (plane sweep)',
        description='Depth of the rectified central view of a raw light-field frame from the '
                    'disparity across the sub-aperture views, through the calibrated model.')
    p.add_argument('raw', help='raw frame (8/16-bit PNG or TIFF)')
    add_decoding_arguments(p)
    p.add_argument('-o', '--output', required=True, metavar='OUT.npy',
                   help='depth map, float32 metres, NaN where unknown')
    p.add_argument('--png', metavar='OUT.png',
                   help='also a 16-bit PNG in mm and OUT_preview.png (colour map)')
    p.add_argument('--ply', metavar='OUT.ply', help='also the point cloud (binary PLY)')
    p.add_argument('--near', type=real(0, 1e4, low_open=True),
                   help='nearest depth swept (m; default 0.5 x the '
                   'distance where the views agree, -2 / (k_3 + k_4))')
    p.add_argument('--far', type=real(0, 1e4, low_open=True),
                   help='farthest depth swept (m; default 2 x it)')
    p.add_argument('--view-step', type=integer(1, 100), default=1,
                   help='use the usable views whose i, j are multiples of this (default 1)')
    p.add_argument('--window', type=integer(1, 101), default=5,
                   help='cost window (odd px, default 5)')
    p.add_argument('--min-confidence', type=real(0, 1), default=0.3,
                   help='depth below this confidence is unknown (default 0.3)')
    p.add_argument('--render-w', type=real(-1e3, 1e3), metavar='W',
                   help='focused cameras: the inverse virtual depth the image and its depth are '
                        'rendered at (default: the frame\'s own)')
    p.add_argument('--truth', metavar='DEPTH.npy',
                   help='ground-truth depth to compare with (prints the errors)')
    p.set_defaults(func=run)


def add_decoding_arguments(p):
    """--calibration, --white, --views: what decoding a raw frame needs."""
    p.add_argument('--calibration', required=True, metavar='CAL',
                   help='calibration file with a lenslet_grid (from raw calibration)')
    p.add_argument('--white', help='white image of the camera (default: white.png beside RAW)')
    p.add_argument('--dark', metavar='FILE',
                   help='dark frame (same size and bit depth, no light), subtracted from RAW and '
                        'the white first (default: dark.png beside RAW when the white is '
                        'white.png beside it, as simulate writes them)')
    p.add_argument('--views', default='9x9', help='view grid NIxNJ decoded (odd), default 9x9')


def white_and_dark_paths(args):
    """(white, dark or None) that decoding ``args.raw`` reads: ``--white`` (default white.png
    beside RAW) and ``--dark`` (default dark.png beside RAW when the white is the one beside
    it and dark.png is there)."""
    beside = Path(args.raw).parent
    white_path = Path(args.white) if args.white else beside / 'white.png'
    dark_path = getattr(args, 'dark', None)
    if dark_path is None and not args.white and (beside / 'dark.png').is_file():
        dark_path = beside / 'dark.png'
    return white_path, dark_path


def implied_inputs(args):
    """(label, path) of the files read though not named (white.png, dark.png beside RAW):
    :func:`lf_mpc_calib.cli.paths.check_outputs` protects them as it does the named ones."""
    white, dark = white_and_dark_paths(args)
    return [(label, Path(p)) for label, p, named in (
        ('white image beside RAW', white, args.white),
        ('dark frame beside RAW', dark, getattr(args, 'dark', None))) if p and not named]


def read_raw_and_white(args):
    """
    (raw, white) of ``args.raw`` and ``--white`` (default white.png beside RAW), each less
    ``--dark`` (default: dark.png beside RAW when the white is the one beside it), in their
    own dtype.
    """
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.lenslet.dark_frame import check_dark, minus_dark
    from lf_mpc_calib.io.images import read_image
    white_path, dark_path = white_and_dark_paths(args)
    if not args.white and not white_path.is_file():
        raise InvalidInputError(f'no --white given and no white.png beside {args.raw}; the '
                                'white image is needed to decode the frame')
    if dark_path is not None and getattr(args, 'dark', None) is None:
        print(f'dark frame: {dark_path} (beside the frame and its white)', file=sys.stderr)
    raw, white = read_image(args.raw), read_image(white_path)
    if dark_path is not None:
        dark = read_image(dark_path)
        check_dark(white, dark, dark_name=f'dark frame {dark_path}')
        raw, white = minus_dark(raw, dark, str(args.raw)), minus_dark(white, dark, str(white_path))
    return raw, white


def check_white_for(cal, white, path):
    """
    Refuse a white (H, W) or (H, W, 3) that is no white image of the calibration's camera (a
    scene, a checkerboard, a dark or saturated frame): the grid's own checks, at its spacing.
    """
    import numpy as np
    from lf_mpc_calib.errors import DetectionError, InvalidInputError
    from lf_mpc_calib.lenslet.estimate import (check_micro_images_lit, check_white,
                                               neighbour_distance)
    mono = np.asarray(white if white.ndim == 2 else white.mean(axis=2), dtype=np.float32)
    top = float(np.iinfo(white.dtype).max) if white.dtype.kind in 'ui' else None
    grid = cal.lenslet_grid
    try:
        check_white(mono, neighbour_distance(grid) if grid else None, full_scale=top)
        if grid is not None and mono.shape == tuple(grid.image_size)[::-1]:
            xy, r = grid.centres(), 0.5 * neighbour_distance(grid)
            whole = np.all((xy >= r) & (xy <= np.array(grid.image_size) - 1 - r), axis=1)
            check_micro_images_lit(mono, xy[whole])
    except DetectionError as exc:
        raise InvalidInputError(f'{path}: {exc}') from None


def decode_frame(args):
    """(LiveMeasurer, raw, Measurement without points or rays) for the decoding arguments."""
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.measurement.live import LiveMeasurer
    m = re.fullmatch(r'\s*(\d+)\s*[xX]\s*(\d+)\s*', args.views)
    if not m:
        raise InvalidInputError(f'--views must look like 9x9, got {args.views!r}')
    cal = load_calibration(args.calibration)
    raw, white = read_raw_and_white(args)
    check_white_for(cal, white, white_and_dark_paths(args)[0])
    from lf_mpc_calib.lenslet.frame_check import frame_warnings
    for warning in frame_warnings(raw, white):
        print(f'warning: {args.raw}: {warning}', file=sys.stderr)
    measurer = LiveMeasurer.from_calibration(
        cal, white=white if white.ndim == 2 else white.mean(axis=2),
        views=(int(m.group(1)), int(m.group(2))))
    if raw.ndim == 3:
        raw = raw.mean(axis=2).astype(raw.dtype)
    return measurer, raw, measurer.measure(raw, points=False, rays=False)


def load_truth(path):
    """A ground-truth depth map (H, W) float from a .npy file, or InvalidInputError."""
    import numpy as np
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.io.file_checks import load_npy
    truth = load_npy(path, '--truth (a depth map in a .npy file, float metres, H x W)')
    if not isinstance(truth, np.ndarray) or truth.ndim != 2 or truth.dtype.kind != 'f':
        got = (f'{truth.dtype} array of shape {truth.shape}' if isinstance(truth, np.ndarray)
               else type(truth).__name__)
        raise InvalidInputError(f'--truth {path}: expected a float depth map (H x W), got '
                                f'{got}')
    known = truth[~np.isnan(truth)]
    if known.size == 0 or not np.all(np.isfinite(known)) or known.min() <= 0:
        what = ('no value but NaN' if known.size == 0 else
                f'{int(np.sum(~np.isfinite(known)))} infinite and {int(np.sum(known <= 0))} '
                'zero or negative values')
        raise InvalidInputError(f'--truth {path}: expected depths in metres above 0 (NaN where '
                                f'there is none), got {what}')
    return truth


def run(args):
    """Estimate and write the depth; returns the exit code."""
    import numpy as np
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.measurement.depth import DepthEstimator
    out = Path(args.output)
    if out.suffix != '.npy':
        raise InvalidInputError(f'-o must end in .npy, got {out.name!r}')
    truth = load_truth(args.truth) if args.truth else None
    from lf_mpc_calib.io.calibration_file import load_calibration
    if load_calibration(args.calibration).camera_type == 'focused':
        depth, pts, uv, center, top, what = focused_depth(args)
        return _write(args, out, depth, pts, uv, center / top, np.ones(len(pts)), what, truth)
    if args.render_w is not None:
        raise InvalidInputError('--render-w applies to focused calibrations only')
    measurer, raw, meas = decode_frame(args)
    depth_range = None
    if args.near is not None or args.far is not None:
        if args.near is None or args.far is None:
            raise InvalidInputError('give both --near and --far (metres), or neither')
        depth_range = (args.near, args.far)
    decoder = measurer.decoder(raw.dtype)
    est = DepthEstimator.for_decoder(measurer.model, decoder, depth_range=depth_range,
                                     view_step=args.view_step, window=args.window,
                                     min_confidence=args.min_confidence)
    t = time.perf_counter()
    dm = est.estimate(meas.lightfield)
    elapsed = time.perf_counter() - t
    pts, uv = dm.points() if args.ply else (None, None)
    center = meas.center if meas.center.ndim == 2 else meas.center.mean(axis=2)
    scale = 255.0 if raw.dtype == np.uint8 else 65535.0 if raw.dtype == np.uint16 else 1.0
    what = (f'from {len(dm.views)} views x {len(dm.hypotheses)} depths ({est.near:.3g}-'
            f'{est.far:.3g} m): {dm.valid_fraction:.0%} known, median {{med:.3f}} m; decode '
            f'{1e3 * meas.timings["decode"]:.0f} ms, depth {1e3 * elapsed:.0f} ms')
    conf = dm.confidence[uv[:, 1], uv[:, 0]] if args.ply else None
    return _write(args, out, dm.depth, pts, uv, center / scale, conf, what, truth)


def focused_depth(args):
    """(depth (rows, cols) f32, points (P, 3), pixels (P, 2), rendered image, its full
    scale, summary) of RAW with a focused calibration (module docstring)."""
    import numpy as np
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.measurement.focused import (FocusedMeasurer, rendered_depth_points,
                                                  rendered_pinhole)
    from lf_mpc_calib.measurement.focused_depth import MicroImageDepth
    cal = load_calibration(args.calibration)
    raw, white = read_raw_and_white(args)
    check_white_for(cal, white, white_and_dark_paths(args)[0])
    measurer = FocusedMeasurer.from_calibration(cal, white=white)
    if raw.ndim == 3:
        raw = raw.mean(axis=2).astype(raw.dtype)
    top = 255.0 if raw.dtype == np.uint8 else 65535.0 if raw.dtype == np.uint16 else 1.0
    if (raw.shape[1], raw.shape[0]) != tuple(int(v) for v in measurer.grid.image_size):
        raise InvalidInputError(f'{args.raw} is {raw.shape[1]} x {raw.shape[0]} px, the '
                                f'calibration\'s lenslet grid is for '
                                f'{measurer.grid.image_size[0]} x {measurer.grid.image_size[1]}')
    t = time.perf_counter()
    live = measurer.live
    norm = live.normalise(raw.astype(np.float32) / np.float32(top))
    w = live.update_w(norm) if args.render_w is None else float(args.render_w)
    if not (np.isfinite(w) and w != 0.0):
        raise InvalidInputError(f'--render-w must be a finite non-zero w, got {w}')
    import cv2
    mx, my = live.maps(w)
    center = np.clip(cv2.remap(norm, mx, my, cv2.INTER_LINEAR), 0.0, 1.0)
    pinhole = rendered_pinhole(measurer.model, w, center.shape[::-1])
    depth = MicroImageDepth(measurer.detector, terms=measurer.terms).depth_image(
        norm, measurer.model, w, pinhole.size)
    elapsed = time.perf_counter() - t
    pts, uv = rendered_depth_points(pinhole, depth)
    pts = cal.optical_frame.points(pts)            # the optical frame: origin the main lens
    known = np.isfinite(depth).mean()
    what = (f'of the image rendered at w {w:.4f} (micro-image disparities): {known:.0%} known, '
            f'median {{med:.3f}} m; render and depth {1e3 * elapsed:.0f} ms')
    return depth, pts, uv, center, 1.0, what


def _write(args, out, depth, pts, uv, intensity, confidence, what, truth):
    """Write OUT.npy (last), --png, --ply; print the summary and the errors against truth."""
    import numpy as np
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.io.depth_files import depth_preview_with_scale, write_depth_png, write_ply
    if truth is not None and truth.shape != depth.shape:
        raise InvalidInputError(f'--truth has shape {truth.shape}, the depth {depth.shape}'
                                + (' (focused: give --render-w, the render_w of the dataset\'s '
                                   'manifest)' if args.render_w is None else ''))
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.png:
        png = Path(args.png)
        write_depth_png(png, depth)
        from lf_mpc_calib.io.images import write_image
        write_image(png.with_name(png.stem + '_preview.png'), depth_preview_with_scale(depth))
    if args.ply:
        write_ply(args.ply, pts, intensity=intensity[uv[:, 1], uv[:, 0]],
                  confidence=confidence)
    from lf_mpc_calib.io.atomic import open_atomically
    with open_atomically(out, 'wb') as f:     # last: written only when all else was
        np.save(f, depth)
    known = np.isfinite(depth)
    med = float(np.median(depth[known])) if known.any() else float('nan')
    print(f'depth {depth.shape[1]}x{depth.shape[0]} px {what.format(med=med)} -> {out}')
    if truth is not None:
        both = known & np.isfinite(truth)
        rel = np.abs(depth[both] - truth[both]) / truth[both]
        cover = both.sum() / max(np.isfinite(truth).sum(), 1)
        print(f'against {args.truth}: {both.sum()} px ({cover:.0%} of the truth\'s), median '
              f'|relative error| {100 * np.median(rel):.2f} %, 90th percentile '
              f'{100 * np.percentile(rel, 90):.2f} %')
    return 0

"""
Live focused decode: the code before the fast path against it, per stage, on the same frames.

Renders a white and a short sequence of frames of the focused-keplerian preset (a board moving
slowly in depth and sideways, as on an arm), then times per frame, one core, CPU time
(time.process_time; wall time beside it):
- ~/center: before, the detector's normalise, estimate_w and render every frame; now,
  measurement.focused_live.LiveCenterRenderer (cached maps, w walked from the cached value);
- ~/points: before, the measurer's render (as ~/center before), a full detection
  (MicroImageCornerDetector.detect) and triangulation every frame; now, FocusedMeasurer with
  its MicroImageCornerTracker (the first frame detects in full, timed apart); accuracy:
  median 3-D error of the corners against the board's true pose (the
  optics' exact model), tracked and detected in full on the same frames.
- ~/depth: before, the whole-range disparity search (benchmarks/focused_depth_before.py, the
  code before measurement.focused_depth.MicroImageDepth) on one frame; now, MicroImageDepth
  near the rendered image's w on every frame (the normalised frame and w come from ~/center,
  timed there); frames of textured planes at 0.30-0.50 m (MPC frame), whose true depth in the
  rendered image's pixels (simulation.focused_raw.scene_depth_truth) gives the median relative
  error and the coverage (the part of the planes' pixels with a depth) of both;
- ~/rays: not offered before; now FocusedRays' gather of the decimated pixels' intensities
  per frame (its geometry once per calibration and white, timed apart);
- tracking a real stream (issue 40): the sequences of simulation.live_sequences (every 2nd..
  10th frame of the live loop, a jump back of its whole diameter, the board leaving the view
  and coming back, sudden 5 mm / 3 degree moves) through FocusedMeasurer: the share of the
  frames with the board in view found without a full search, the CPU ms a frame (finding
  the corners: CornerSearch.find) of the tracker, of each re-acquisition seed and of the full
  search, and the median 3-D error of the frames found against the full detection's on the
  same frames (``--sequences`` alone);
--r12 adds frames of 4080 x 3068 (the Raytrix R12's size: the preset's optics and pixels on a
sensor of that size, so more micro-images, the same per micro-image).

Depth accuracy per preset (Keplerian, Galilean, multi-focus) on the planes of
``simulate --preset focused-* --scene planes`` (simulation.scene.focused_planes_scene, the truth
in the pixels of the image rendered at its w), calibration the camera's truth (a multi-focus
camera's with its lens types, as ``simulate`` writes it): median relative error and coverage
of MicroImageDepth, beside OpenCV StereoSGBM on two sub-aperture-like images rendered from the
micro-images (patches shifted by +-r/4 along x, r the usable micro-image radius: a horizontal
baseline of r/2 raw px), upsampled 2x, whose disparity d (rendered px) gives the model's w_P =
baseline |w| / d and the depth through the calibrated model; the same truth and pixels.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_focused_live.py --quick
"""

import argparse
import time

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
from lf_mpc_calib.measurement.focused_live import LiveCenterRenderer
from lf_mpc_calib.simulation.focused_raw import board_pose
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import render_raw, render_scene, render_white


def frames(cam, n, samples):
    """A white and n raw frames of a board drifting in depth and sideways."""
    # 12 x 9 inner corners: no 180 degree ambiguity of the labels (the 3-D errors need them)
    board = Checkerboard(12, 9, 0.7 * cam.field_of_view(cam.scene_distance)[1] / 10)
    white = render_white(cam, samples=samples)
    raws = []
    for k in range(n):
        d = (1.25 + 0.002 * k) * cam.scene_distance
        rv, tv = board_pose(cam, board, d, (10.0, -8.0, 3.0), offset=(0.0005 * k, 0.0))
        POSES.append((rv, tv))
        raws.append(render_raw(cam, board, rv, tv, samples=samples, noise=0.0))
    return white, raws, board


def todays_center(det, raw):
    """Today's ~/center (FocusedMeasurer.measure before focused_live): every step per frame."""
    norm = det.normalise(raw)
    return np.clip(det.render(norm, det.estimate_w(norm))[0], 0.0, 1.0)


def timed(fn, raws):
    """(mean CPU s, mean wall s, outputs) of fn over the frames."""
    out, c0, t0 = [], time.process_time(), time.perf_counter()
    for raw in raws:
        out.append(fn(raw))
    n = len(raws)
    return (time.process_time() - c0) / n, (time.perf_counter() - t0) / n, out


def points_stage(cam, det, white, raws, board, truth, n_old):
    """Per-frame CPU s of ~/points before and now, and the median 3-D errors (m) of both."""
    from lf_mpc_calib.measurement.focused import FocusedMeasurer, triangulate_rows
    model = cam.ground_truth_model()

    def err(ids, pts, k):
        return np.median(np.linalg.norm(pts - truth[k][ids], axis=1))

    def before(k):          # the measurer rendered ~/center, then detected in full
        todays_center(det, raws[k])
        obs = det.detect(raws[k], board).observations
        pts, keys = triangulate_rows(model, obs)
        return err(keys[:, 1], pts, k)
    c_old, w_old, e_old = timed(before, list(range(n_old)))
    meas = FocusedMeasurer(model, det.grid, board=board, white=white)
    first = meas.measure(raws[0])                   # the full detection the tracker starts from
    searches = []

    def now(k):
        m = meas.measure(raws[k])
        searches.append(m.corner_search)
        return err(m.point_ids, m.points, k) if len(m.points) else np.nan
    c_new, w_new, e_new = timed(now, list(range(1, len(raws))))
    tracked = sum(s == 'tracked' for s in searches)
    return (c_old, w_old, float(np.median(e_old)), c_new, w_new, float(np.nanmedian(e_new)),
            tracked, first.corner_search)


def sequences_stage(cam, samples, *, compare=4):
    """
    {sequence: (found, in view, {mode: [CPU s]}, [median 3-D error found], [... full])} of
    FocusedMeasurer on the sequences of simulation.live_sequences; the full detection's
    errors on the first ``compare`` frames of each sequence with the board in view.
    """
    from lf_mpc_calib.measurement.focused import FocusedMeasurer, triangulate_rows
    from lf_mpc_calib.simulation.live_sequences import tracking_sequences
    board = Checkerboard(12, 9, 0.7 * cam.field_of_view(cam.scene_distance)[1] / 10)
    white = render_white(cam, samples=samples)
    poses, sequences = tracking_sequences(cam, board, 1.25 * cam.scene_distance,
                                          (10.0, -8.0, 3.0))
    raws = {k: render_raw(cam, board, rv, tv, samples=samples, noise=0.0).astype(np.float32)
            for k, (rv, tv, _) in poses.items()}
    model = cam.ground_truth_model()
    det = MicroImageCornerDetector(white)

    def err(key, ids, pts):
        rv, tv, _ = poses[key]
        truth = board.points() @ Rotation.from_rotvec(rv).as_matrix().T + tv
        return float(np.median(np.linalg.norm(pts - truth[ids], axis=1)))
    out = {}
    for name, seq in sequences.items():
        meas = FocusedMeasurer(model, det.grid, board=board, white=white)
        cpu = _cpu_timed(meas.search)
        costs, found, in_view, mine, full = {}, 0, 0, [], []
        for k, key in enumerate(seq):
            cpu.clear()
            m = meas.measure(raws[key])
            dt = cpu[-1] if cpu else np.nan         # CPU s finding the corners
            mode = m.corner_search.split(':')[0] or 'no image (no texture)'
            costs.setdefault(mode, []).append(dt)
            if k == 0 or not poses[key][2]:
                continue
            in_view += 1
            if not m.corner_search.startswith(('tracked', 're-acquired')):
                continue
            found += 1
            if len(mine) < compare:
                obs = det.detect(raws[key], board).observations
                pts, keys = triangulate_rows(model, obs)
                mine.append(err(key, m.point_ids, m.points))
                full.append(err(key, keys[:, 1], pts))
        out[name] = (found, in_view, costs, mine, full)
    return out, seed_costs(model, det, white, board, raws['loop 0'], raws['5 mm x'])


def seed_costs(model, det, white, board, before, after, repeat=3):
    """CPU s of each way to find the corners of ``after`` (a sudden 5 mm move) from a full
    detection of ``before``: the tracker from the prediction (it fails here: the cost of
    trying), seed A (shift) and seed B (board search) each with its refinement, the full
    detection; and whether each found the board."""
    from lf_mpc_calib.measurement.focused import FocusedMeasurer
    meas = FocusedMeasurer(model, det.grid, board=board, white=white)
    meas.measure(before)
    tr = meas.tracker
    norm = meas.live.normalise(after)
    rendered, w = meas.live.render_normalised(norm)
    ways = {'tracker (prediction)': lambda: tr._follow(norm, *tr._prediction(), passes=1),
            'shift (seed A)': lambda: tr._follow(norm, *tr._shift_seed(rendered, w), passes=2),
            'board search (seed B)': lambda: tr._follow(norm, *tr._board_seed(rendered, w),
                                                        passes=2),
            'full search': lambda: (meas.detector.detect(after, board), None)}
    out = {}
    for name, fn in ways.items():
        c0 = time.process_time()
        for _ in range(1 if name == 'full search' else repeat):
            found = fn()[0]
        out[name] = ((time.process_time() - c0) / (1 if name == 'full search' else repeat),
                     found is not None)
    return out


def _cpu_timed(search):
    """The list that ``search.find`` (a CornerSearch) appends its CPU s of each call to."""
    find, cpu = search.find, []

    def timed_find(*args):
        c0 = time.process_time()
        out = find(*args)
        cpu.append(time.process_time() - c0)
        return out
    search.find = timed_find
    return cpu


def print_sequences(size, samples):
    """The tracking-sequence lines of the benchmark (module docstring)."""
    cam = preset('focused-keplerian') if size is None else \
        preset('focused-keplerian', sensor__width=size[0], sensor__height=size[1])
    res, seeds = sequences_stage(cam, samples)
    wd, h = cam.sensor.width, cam.sensor.height
    print(f'{wd}x{h}  tracking a real stream (frames with the board in view after the first; '
          f'CPU ms a frame finding the corners (CornerSearch.find), by how they were found)')
    every, ratios = {}, []
    for name, (found, in_view, costs, mine, full) in res.items():
        for mode, v in costs.items():
            every.setdefault(mode, []).extend(v)
        ratio = np.median(mine) / np.median(full) if mine else np.nan
        ratios.append(ratio)
        print(f'   {name:12s} found {found}/{in_view} ({100 * found / max(in_view, 1):.0f} %)  '
              + ', '.join(f'{mode} {1e3 * np.median(v):.1f} ms x{len(v)}'
                          for mode, v in costs.items())
              + f'  3-D error {1e3 * np.median(mine):.2f} mm vs full detection '
              f'{1e3 * np.median(full):.2f} mm (ratio {ratio:.2f})')
    print('   all sequences, median CPU ms: ' + ', '.join(
        f'{mode} {1e3 * np.median(v):.1f} (x{len(v)})' for mode, v in every.items())
        + f'; worst 3-D error ratio {np.nanmax(ratios):.2f}')
    print('   a sudden 5 mm move, each way alone, CPU ms: ' + ', '.join(
        f'{name} {1e3 * t:.1f} ({"found" if ok else "lost"})' for name, (t, ok) in seeds.items()))


def planes(cam, n, samples):
    """n raw frames of textured planes drifting sideways, and their scenes."""
    from lf_mpc_calib.simulation.scene import Scene, TexturedPlane, view_pixel_size
    raws, scenes = [], []
    for k in range(n):
        surfaces = []
        for (x, y), z, size, tilt in [((0.0, 0.0), 0.50, 1.4, 0.0),
                                      ((-0.15, 0.05), 0.40, 0.5, 0.35),
                                      ((0.25, -0.2), 0.30, 0.35, 0.0)]:
            fw, fh = cam.field_of_view(z)
            rot = Rotation.from_euler('y', tilt)          # turned about the vertical axis
            centre = np.array([(x + 0.002 * k) * fw, y * fh, z])
            tvec = centre - rot.apply([size * fw / 2, size * fh / 2, 0.0])
            surfaces.append(TexturedPlane(rot.as_rotvec(), tvec, size * fw, size * fh,
                                          2 * view_pixel_size(cam, z), 7 + len(surfaces)))
        scenes.append(Scene(tuple(surfaces)))
        raws.append(render_scene(cam, scenes[-1], samples=samples, noise=0.0).astype(np.float32))
    return raws, scenes


def depth_stage(cam, det, raws, scenes):
    """Per-frame CPU s of ~/depth before and now, with the median relative errors and the
    coverages against the truth of both."""
    from focused_depth_before import micro_image_depth as todays_depth   # beside this file
    from lf_mpc_calib.measurement.focused import rendered_pinhole
    from lf_mpc_calib.measurement.focused_depth import MicroImageDepth
    from lf_mpc_calib.simulation.focused_raw import scene_depth_truth
    model = cam.ground_truth_model()
    live = LiveCenterRenderer(det)
    frames = []
    for raw, scene in zip(raws, scenes):
        norm = live.normalise(raw)
        center, w = live.render_normalised(norm)
        ph = rendered_pinhole(model, w, center.shape[::-1])
        frames.append((norm, w, ph, scene_depth_truth(ph, scene)))
    depth = MicroImageDepth(det)
    depth.depth_image(frames[0][0], model, frames[0][1], frames[0][2].size)     # the maps
    c_old, w_old, old = timed(lambda f: todays_depth(det, f[0], model, f[1], f[2].size),
                              frames[:1])
    c_new, w_new, new = timed(lambda f: depth.depth_image(f[0], model, f[1], f[2].size),
                              frames)

    def score(images):
        rel, cover = [], []
        for img, (_, _, _, truth) in zip(images, frames):
            both = np.isfinite(img) & np.isfinite(truth)
            rel.append(np.abs(img[both] - truth[both]) / truth[both])
            cover.append(both.sum() / max(np.isfinite(truth).sum(), 1))
        return float(np.median(np.concatenate(rel))), float(np.mean(cover))
    return c_old, w_old, score(old), c_new, w_new, score(new), frames[0][1]


def rays_stage(cam, det, raws32):
    """~/rays (not offered before): (geometry once, per frame) s CPU and the ray count, at the
    node's default decimation (ray_step 8, ray_view_step 4) and at every pixel (1, 1)."""
    from lf_mpc_calib.measurement.focused_rays import FocusedRays
    out = []
    for step, lens in ((8, 4), (1, 1)):
        c0 = time.process_time()
        rays = FocusedRays(det, cam.ground_truth_model(det.grid), ray_step=step,
                           lens_step=lens)
        build = time.process_time() - c0
        per_frame = timed(lambda r: rays.ray_set(r, 1.0), raws32 * 10)[0]   # sub-ms: 10x
        out.append((step, lens, build, per_frame, len(rays)))
    return out


def sgbm_depth(live, norm, model, w, baseline):
    """Depth (rows, cols) f32 (NaN where unknown) of the image rendered at w from StereoSGBM on
    two views rendered from patches +-baseline / 2 raw px apart along x (module docstring)."""
    mx, my = live.maps(w)
    views = []
    for s in (0.5 * baseline * np.sign(w), -0.5 * baseline * np.sign(w)):   # left, right
        v = cv2.remap(norm, mx + np.float32(s), my, cv2.INTER_LINEAR,
                      borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        v = np.round(255 * np.clip(v, 0.0, 1.0)).astype(np.uint8)
        views.append(cv2.resize(v, None, fx=2, fy=2, interpolation=cv2.INTER_CUBIC))
    block = 5
    sgbm = cv2.StereoSGBM_create(minDisparity=0, numDisparities=64, blockSize=block,
                                 P1=8 * block ** 2, P2=32 * block ** 2, uniquenessRatio=10,
                                 speckleWindowSize=50, speckleRange=2)
    d = sgbm.compute(*views).astype(np.float32) / 32.0         # 1/16 px, at 2x
    d = cv2.resize(d, (mx.shape[1], mx.shape[0]), interpolation=cv2.INTER_NEAREST)
    with np.errstate(divide='ignore', invalid='ignore'):
        w_p = np.where(d > 0, np.sign(w) * baseline * abs(w) / d, np.nan)
        depth = 1.0 / (-w_p * model.k_u / model.k_i - model.k_3) \
            + 0.5 * (1.0 / model.k_3 + 1.0 / model.k_4)
    depth[~(depth > 0)] = np.nan
    return depth.astype(np.float32)


def preset_accuracy(name, size, n, samples):
    """Median relative error, coverage and CPU s per frame of MicroImageDepth and of
    StereoSGBM (:func:`sgbm_depth`) on n frames of the planes of ``simulate --scene planes``."""
    from lf_mpc_calib.measurement.focused import FocusedMeasurer, type_class_map
    from lf_mpc_calib.measurement.focused_depth import MicroImageDepth
    from lf_mpc_calib.simulation.focused_raw import lens_types_of
    from lf_mpc_calib.simulation.scene import focused_planes_scene
    from lf_mpc_calib.simulation.scene_dataset import focused_depth_truth
    cam = preset(name) if size is None else \
        preset(name, sensor__width=size[0], sensor__height=size[1])
    grid = cam.lenslet_grid()
    lens_types = None
    if cam.mla.n_types > 1:         # what simulate --scene planes writes in ground_truth.yaml
        rule = type_class_map(grid, lens_types_of(cam, grid.centres()), cam.mla.n_types)
        lens_types = {**cam.ground_truth_lens_types().to_dict(), **rule}
    model = cam.ground_truth_model(grid)
    meas = FocusedMeasurer(model, grid, lens_types=lens_types,
                           white=render_white(cam, samples=max(samples, 4)))
    depth = MicroImageDepth(meas.detector, terms=meas.terms)
    baseline = 0.5 * depth.r_in
    rng = np.random.default_rng(0)
    scores = {'ours': [], 'sgbm': []}
    cpu = {'ours': 0.0, 'sgbm': 0.0}
    for _ in range(n):
        scene, w = focused_planes_scene(cam, rng)
        truth = focused_depth_truth(cam, scene, w)
        raw = render_scene(cam, scene, samples=samples, rng=rng).astype(np.float32)
        norm = meas.live.normalise(raw)
        depth.depth_image(norm, model, w, truth.shape[::-1])          # the maps, once
        meas.live.maps(w)
        for key, fn in (('ours', lambda: depth.depth_image(norm, model, w, truth.shape[::-1])),
                        ('sgbm', lambda: sgbm_depth(meas.live, norm, model, w, baseline))):
            c0 = time.process_time()
            img = fn()
            cpu[key] += time.process_time() - c0
            both = np.isfinite(img) & np.isfinite(truth)
            scores[key].append((np.abs(img[both] - truth[both]) / truth[both],
                                both.sum() / max(np.isfinite(truth).sum(), 1)))
    return {k: (float(np.median(np.concatenate([r for r, _ in v]))),
                float(np.mean([c for _, c in v])), cpu[k] / n) for k, v in scores.items()}


def run(size, n, samples):
    cam = preset('focused-keplerian') if size is None else \
        preset('focused-keplerian', sensor__width=size[0], sensor__height=size[1])
    white, raws, board = frames(cam, n, samples)
    det = MicroImageCornerDetector(white)
    raws32 = [r.astype(np.float32) for r in raws]
    c_old, w_old, ref = timed(lambda r: todays_center(det, r), raws32[:max(3, n // 2)])
    fast = LiveCenterRenderer(det)
    fast.render(raws32[0])          # the first frame builds the maps (timed apart)
    c_new, w_new, new = timed(fast.render, raws32)
    diffs, same = [], 0
    for old, (img, _) in zip(ref, new):
        if old.shape == img.shape:          # the same step 1 / |w|
            same += 1
            diffs.append(np.abs(old - img))
    h, wd = raws[0].shape
    print(f'{wd}x{h}  ~/center  before {1e3 * c_old:8.1f} ms CPU ({1e3 * w_old:7.1f} wall)  '
          f'now {1e3 * c_new:6.1f} ms CPU ({1e3 * w_new:6.1f} wall)  '
          f'{1 / c_new:6.1f} fps  ratio {c_old / c_new:5.1f}x  '
          f'w searches {fast.w_estimates}, walks {fast.w_refines} in {n + 1} frames')
    if diffs:
        print(f'   accuracy vs before ({same}/{len(ref)} frames at the same w): '
              f'max |d| {max(d.max() for d in diffs):.4f}, '
              f'mean |d| {np.mean([d.mean() for d in diffs]):.5f} (normalised units)')
    norm = fast.normalise(raws32[-1])
    mx, my = fast.maps(fast.w)
    stages = {'normalise': lambda: fast.normalise(raws32[-1]),
              'remap': lambda: cv2.remap(norm, mx, my, cv2.INTER_LINEAR),
              'w search (first frame)': lambda: det.estimate_w(norm),
              'w walk (when due)': lambda: det.refine_w(norm, fast.w)}
    print('   stages now, ms CPU: ' + ', '.join(
        f'{k} {1e3 * timed(lambda _: f(), [None] * 3)[0]:.1f}' for k, f in stages.items()))
    truth = [board.points() @ Rotation.from_rotvec(rv).as_matrix().T + tv
             for rv, tv in POSES[:len(raws)]]
    (p_old, pw_old, e_old, p_new, pw_new, e_new, tracked,
     first) = points_stage(cam, det, white, raws32, board, truth, min(3, n))
    depth = float(np.median([t[:, 2].mean() for t in truth]))
    print(f'{wd}x{h}  ~/points  before {1e3 * p_old:8.1f} ms CPU ({1e3 * pw_old:7.1f} wall)  '
          f'now {1e3 * p_new:6.1f} ms CPU ({1e3 * pw_new:6.1f} wall)  '
          f'{1 / p_new:6.1f} fps  ratio {p_old / p_new:5.1f}x  tracked {tracked}/{n - 1}')
    print(f'   3-D corner error, median: full detection {1e3 * e_old:.2f} mm, tracked '
          f'{1e3 * e_new:.2f} mm ({100 * e_old / depth:.2f} / {100 * e_new / depth:.2f} % of '
          f'the distance); first frame: {first}')
    rays = rays_stage(cam, det, raws32)
    print(f'{wd}x{h}  ~/rays    not offered before; now ' + '; '.join(
        f'{1e3 * per:.2f} ms CPU a frame for {count} rays (ray_step {st}, ray_view_step {ln}; '
        f'geometry {1e3 * b:.0f} ms once)' for st, ln, b, per, count in rays))
    d_raws, scenes = planes(cam, max(2, n // 4), samples)
    d_old, dw_old, (r_old, cov_old), d_new, dw_new, (r_new, cov_new), w0 = depth_stage(
        cam, det, d_raws, scenes)
    print(f'{wd}x{h}  ~/depth   before {1e3 * d_old:8.1f} ms CPU ({1e3 * dw_old:7.1f} wall)  '
          f'now {1e3 * d_new:6.1f} ms CPU ({1e3 * dw_new:6.1f} wall)  '
          f'{1 / d_new:6.1f} fps  ratio {d_old / d_new:5.1f}x  ({len(d_raws)} frames of planes, '
          f'rendered at w {w0:.3f})')
    print(f'   depth vs truth: median relative error before {100 * r_old:.2f} %, now '
          f'{100 * r_new:.2f} %; coverage of the planes before {100 * cov_old:.0f} %, now '
          f'{100 * cov_new:.0f} %')
    n_acc = 1 if n <= 12 else 2
    print(f'{wd}x{h}  depth accuracy on the planes of simulate --scene planes ({n_acc} frame(s) '
          f'per preset; CPU ms per frame; SGBM: two rendered views, baseline r/2, 2x)')
    for name in ('focused-keplerian', 'focused-galilean', 'focused-multifocus'):
        acc = preset_accuracy(name, size, n_acc, samples)
        (r_o, c_o, t_o), (r_s, c_s, t_s) = acc['ours'], acc['sgbm']
        print(f'   {name:19s} micro-image depth: median {100 * r_o:5.2f} %, coverage '
              f'{100 * c_o:3.0f} %, {1e3 * t_o:6.1f} ms ({1 / t_o:5.1f} fps)  |  StereoSGBM: '
              f'median {100 * r_s:5.2f} %, coverage {100 * c_s:3.0f} %, {1e3 * t_s:6.1f} ms')
    return wd, h, 1 / c_new, 1 / p_new, 1 / d_new


POSES = []


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--quick', action='store_true', help='preset size only, few frames')
    ap.add_argument('--r12', action='store_true', help='also 4080 x 3068 frames')
    ap.add_argument('--frames', type=int, default=None)
    ap.add_argument('--samples', type=int, default=4, help='rays per pixel of the renders')
    ap.add_argument('--sequences', action='store_true',
                    help='only the tracking sequences (a real stream) at the preset size')
    args = ap.parse_args()
    if args.sequences:
        print_sequences(None, args.samples)
        return
    n = args.frames or (12 if args.quick else 30)
    sizes = [None] + ([(4080, 3068)] if args.r12 and not args.quick else [])
    lines = []
    for size in sizes:
        POSES.clear()
        wd, h, fps_c, fps_p, fps_d = run(size, n, args.samples)
        print_sequences(size, args.samples)
        lines.append(f'focused live {wd}x{h}: center {fps_c:.1f} fps, points {fps_p:.1f} fps, '
                     f'depth {fps_d:.1f} fps (one core, CPU time)')
    print('\n'.join(lines[1:] + lines[:1]))


if __name__ == '__main__':
    main()

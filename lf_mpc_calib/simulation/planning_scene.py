"""
The pose planner set up for a simulated camera: its true model, views and capture constraints.

The constraints follow :mod:`lf_mpc_calib.simulation.dataset`: board centres over
:func:`~lf_mpc_calib.simulation.dataset.capture_depth_range` x the scene distance, tilts up to
CAPTURE_TILT_DEG, for a focused camera 25 % kept clear around the plane conjugate to its
micro-lenses; depths are converted to the MPC frame (focused: Z counts from that plane; the
refusals name them from the main lens, as the optical frame has them). A
multi-focus camera's micro-images see a corner only in their type's focus band
(:func:`type_focus_depths`).
"""

import numpy as np

from lf_mpc_calib.calibration.closed_form import canonical_frame_signs, sign_change
from lf_mpc_calib.calibration.planning import PoseConstraints, PosePlanner
from lf_mpc_calib.camera.rotations import rotation_matrix, rotation_vector
from lf_mpc_calib.simulation.dataset import (
    CAPTURE_TILT_DEG, board_in_view, capture_depth_range, ground_truth_file)
from lf_mpc_calib.simulation.observations import view_grid

FOCUSED_RADIUS_FRACTION = 0.9
"""Part of a micro-image where a corner is seen (focused_observations' default)."""
VIEW_RIM_PX = 1.5
"""Conventional: views within micro_image_radius - VIEW_RIM_PX of the centre are used (the
bright views the decoder keeps: 37 on the Lytro preset, as calibrate-raw reads)."""
CONJUGATE_BAND = 0.25
"""Fraction of the conjugate plane's distance kept clear around it (dataset)."""
MAX_BLUR_PX = 2.0
"""Multi-focus: a micro-lens type sees a corner where its blur circle is at most this (px)."""


def type_focus_depths(camera, *, max_blur_px=MAX_BLUR_PX, samples=4000):
    """
    ((lo, hi),) * T: the board depths (Z, MPC frame) that each micro-lens type of a
    multi-focus ``camera`` images with a blur circle of at most max_blur_px, from its optics:
    an on-axis point at distance x images at z_i = F x / (x - F), depth = D - z_i before the
    micro-lenses; type T (gap b_T, focal length f_T, sharp at a_T = 1 / (1/f_T - 1/b_T)) blurs
    it over pitch b_T |1/a_T - 1/depth|.
    """
    main = camera.main_lens
    f_main, d_mla, pitch = main.focal_length, camera.D, camera.mla.pitch
    z_f = 1.0 / main.inverse_focus
    x = np.geomspace(1.05 * f_main, 50.0 * camera.scene_distance, samples)
    depth = d_mla - f_main * x / (x - f_main)
    bands = []
    for f_t, off in zip(camera.mla.type_focal_lengths, camera.mla.type_gap_offsets):
        b_t = camera.gap + off
        a_t = 1.0 / (1.0 / f_t - 1.0 / b_t)
        blur = pitch * b_t * np.abs(1.0 / a_t - 1.0 / depth) / camera.sensor.pixel_pitch
        sharp = x[blur <= max_blur_px]
        bands.append((float(sharp.min() - z_f), float(sharp.max() - z_f)))
    return tuple(bands)


def planning_constraints(camera, *, max_tilt_deg=CAPTURE_TILT_DEG):
    """(true MPCModel, :class:`PoseConstraints` in the MPC frame) of a simulated ``camera``."""
    truth = ground_truth_file(camera, np.zeros((1, 3)), np.array([[0.0, 0.0, 1.0]]))
    near, far = (f * camera.scene_distance for f in capture_depth_range(camera))
    if camera.camera_type == 'conventional':
        n_i = int(truth.views['i'][1] - truth.views['i'][0]) + 1
        n_j = int(truth.views['j'][1] - truth.views['j'][0]) + 1
        views = view_grid(n_i, n_j)
        views = views[np.hypot(*views.T) <= camera.micro_image_radius - VIEW_RIM_PX]
        return truth.model, PoseConstraints(
            views=views, depth_range_m=(near, far),
            image_size=tuple(truth.image_size), max_tilt_deg=max_tilt_deg)
    z_f = 1.0 / camera.main_lens.inverse_focus
    centres = camera.lenslet_grid().centres()
    types = {}
    if camera.mla.n_types > 1:
        types = dict(view_types=camera.mla.lens_type(camera.micro_image_of(centres)[0]),
                     type_depths_m=type_focus_depths(camera))
    return truth.model, PoseConstraints(
        message_origin_z=-z_f,          # refusals name the optical frame's depths (main lens)
        views=centres, depth_range_m=(near - z_f, far - z_f),
        micro_image_radius=FOCUSED_RADIUS_FRACTION * camera.micro_image_radius,
        excluded_depths_m=(-CONJUGATE_BAND * z_f, CONJUGATE_BAND * z_f),
        max_tilt_deg=max_tilt_deg, **types)


def simulated_planner(camera, board, *, noise_px, target_k_pct, target_pp_px, rng):
    """A PosePlanner for ``camera`` (simulation.optics Camera) and ``board`` (Checkerboard)
    whose candidates also keep the whole board inside the raw image (board_in_view)."""
    model, constraints = planning_constraints(camera)
    planner = PosePlanner(model, board.points(), constraints, noise_px=noise_px,
                          target_k_pct=target_k_pct, target_pp_px=target_pp_px, rng=rng,
                          fix=('k_1', 'k_2'))
    planner.pose_filter = lambda rv, tv: board_in_view(camera, board, rv, tv)
    return planner


def follow_suggestions(planner, captures, *, n_candidates):
    """A user who takes ``captures`` poses, each where ``planner`` suggests (its best of
    ``n_candidates``), adding each to it. Returns (rotation vectors (N, 3), translations (N, 3)
    m)."""
    rv, tv = [], []
    for _ in range(int(captures)):
        s = planner.suggest(n_candidates=n_candidates)
        planner.add_capture(s.rotation_vector, s.translation)
        rv.append(s.rotation_vector)
        tv.append(s.translation)
    return np.array(rv), np.array(tv)


def in_optics_frame(truth, rotation_vector_, translation, camera_type='conventional'):
    """
    A board pose (rvec, tvec (3,)) given in the optical frame a calibration reports (what
    ``~/suggest`` gives) in the frame of the simulated optics whose true model is ``truth``
    (MPCModel), the frame the simulator renders in. Conventional cameras: the two may differ
    by axis signs (k_i, k_u > 0 in a calibration:
    :func:`~lf_mpc_calib.calibration.closed_form.canonical_frame_signs`; the Lytro preset's
    by a half turn about the optical axis). Focused cameras (calibrations take the truth's
    orientation, k_3 + k_4 > 0): the optical frame's origin is the main lens, the truth's
    MPC frame's the plane conjugate to the micro-lenses
    (:class:`~lf_mpc_calib.camera.optical_frame.OpticalFrame`), t + C. Returns (rvec (3,),
    tvec (3,)).
    """
    rv, tv = np.asarray(rotation_vector_, float), np.asarray(translation, float)
    if camera_type != 'conventional':
        from lf_mpc_calib.camera.optical_frame import OpticalFrame
        return OpticalFrame.of(truth, camera_type).poses(rv, tv, to_model=True)
    _, rot, t = sign_change(truth, rotation_matrix(rv[None]), tv[None],
                            canonical_frame_signs(truth))
    return rotation_vector(rot)[0], t[0]


def in_optical_frame(truth, rotation_vector_, translation, camera_type='conventional'):
    """
    The inverse of :func:`in_optics_frame`: a board pose (rvec, tvec (3,)) of the simulated
    optics' frame (the truth's MPC frame, in which the simulator renders) in the optical frame
    a calibration of it reports, where the decode node's ``~/points`` and the calibration's
    board poses are (conventional: the calibration's axis signs; focused: origin at the main
    lens, every board at z > 0). Returns (rvec (3,), tvec (3,)).
    """
    rv, tv = np.asarray(rotation_vector_, float), np.asarray(translation, float)
    if camera_type != 'conventional':
        from lf_mpc_calib.camera.optical_frame import OpticalFrame
        return OpticalFrame.of(truth, camera_type).poses(rv, tv)
    # the sign change is its own inverse (canonical_frame_signs)
    return in_optics_frame(truth, rv, tv, camera_type)

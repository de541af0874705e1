"""
The ROS demo: simulated camera + calibration node + decode node in one process.

    lf-mpc-calib demo --ros [--preset lytro] [--poses 6] [--output-dir DIR] [--seed 1]
    python -m lf_mpc_calib.ros.demo [same options]

What a launch file would start (the launch packages cannot be installed without ROS): the
three nodes with default parameters in one namespace, spun by a MultiThreadedExecutor on a
background thread. The main thread plays the user: it captures ``--poses`` board poses through
the real services (``/lf_sim_camera/next_pose``, ``/lf_calibration/capture``), calibrates
(``/lf_calibration/calibrate``), saves, prints the recovered parameters against the simulated
optics' ground truth, then starts the decode node on the saved calibration file, shows it a
new pose and prints the 3-D board corners it measures (``/lf_decoder/points``) against the
true corner positions, and the floor: the same frame detected here and measured with the true
model.

With ``--preset focused-keplerian`` (``focused-galilean``, ``focused-multifocus``) the simulated
camera is a focused (plenoptic 2.0) one: the calibration node runs with ``camera_type``
focused (corners found in the micro-images), the sensor cropped to FOCUSED_DEMO_SCALE (0.7,
not the nodes' 0.5: the principal point rests on the view's extent), the frames rendered ahead
in a worker process (the sim node's ``render_ahead``), and the capture is the one ``simulate
--seed`` renders for it at the same scale (:func:`lf_mpc_calib.simulation.dataset.capture_poses`:
boards spread where the micro-lenses focus, ``FOCUSED_CAPTURE_POSES`` poses at
``FOCUSED_SAMPLES`` rays per pixel) with a board of more corners (``capture_board`` with
squares of FOCUSED_SQUARE_PX raw pixels at the farthest pose, not 55) plus a new pose in the
middle of its depth range for the decode node, which renders an image from the micro-images
and triangulates the corners from every micro-image that sees them. The demo ends with its
verdict against the simulator's truth: the largest error of k_i, k_j, k_u, k_v, the principal
point's and the decode node's 3-D corners over the floor, against TRUST_K_PERCENT, TRUST_PP_PX
and TRUST_FLOOR_RATIO.
A multi-focus camera is calibrated with its number of lens types (``lens_types`` of the
calibration node; ``--lens-types 1``: one type): the node tells the type of every micro-image
from the captures, the demo prints how many it got right against the simulator (up to the
labels' order) and the per-type terms against the optics' truth, and the decode node applies
them.

With ``--plan`` the poses are planned in a closed loop (:mod:`lf_mpc_calib.ros.demo_plan`):
the calibration node suggests each next board pose, the simulated camera follows it, until the
target sigmas are reached or ``--max-captures``; the demo prints the captures used, the
predicted and reported sigmas and the errors against the truth.

With ``--hand-eye [eye-in-hand|eye-to-hand]`` the camera rides on a simulated arm (or watches
the board in its gripper): the calibration node takes base -> tool from /tf at every capture
and solves the mount; the demo prints it against the arm's truth, then takes the decode node's
corners into the base frame through TF (/tf from the arm, the mount on /tf_static) and prints
their error against the true corners in the base frame and the optical-frame floor.

With ``--live [SECONDS]`` the simulated camera streams at 15 Hz and, after the single-frame
measurement, plays the new pose as a loop of frames of the board drifting 2 mm sideways and
1 % in depth (:meth:`SimCameraNode.start_motion`); the demo prints the decode node's rate,
latency and stages, how its corners were found (tracked or full search), and the 3-D error of
every measured frame against that frame's true board pose.
"""

import argparse
import dataclasses
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from lf_mpc_calib.calibration.closed_form import aligned_truth
from lf_mpc_calib.camera.optical_frame import OpticalFrame
from lf_mpc_calib.camera.rotations import rotation_matrix


def add_arguments(parser):
    """The demo's options (shared by ``lf-mpc-calib demo --ros``)."""
    from lf_mpc_calib.cli.numbers import integer, real, SEED
    from lf_mpc_calib.ros.defaults import SIM_PRESET
    from lf_mpc_calib.simulation.names import PRESETS
    parser.add_argument('--preset', default=SIM_PRESET, choices=PRESETS,
                        help='simulated camera preset (default: %(default)s)')
    parser.add_argument('--poses', type=integer(1, 1000), default=None,
                        help="board poses to capture (default: 6; focused presets: as many as "
                             "simulate's focused capture, FOCUSED_CAPTURE_POSES)")
    parser.add_argument('--output-dir', default=None, metavar='DIR',
                        help='where the calibration node saves (default: a temporary folder)')
    parser.add_argument('--seed', type=SEED, default=1,
                        help='seed of the simulated poses (default: %(default)s)')
    parser.add_argument('--scale', type=real(0, 1, low_open=True), default=None,
                        help="sensor crop of the simulated camera (default: the nodes' "
                             'default; focused presets FOCUSED_DEMO_SCALE, 0.7; with --plan '
                             '--hand-eye PLANNED_ARM_DEMO_SCALE, 1.0)')
    parser.add_argument('--hand-eye', nargs='?', const='eye-in-hand', default=None,
                        choices=('eye-in-hand', 'eye-to-hand'),
                        help='the camera on a simulated robot arm (eye-in-hand, the default '
                             'with the flag) or watching the board in its gripper '
                             '(eye-to-hand): solve and check the mount')
    parser.add_argument('--lens-types', type=integer(1, 16), default=None, metavar='T',
                        help='micro-lens types the calibration node tells apart (default: the '
                             "preset's, 3 for focused-multifocus; 1: one type)")
    parser.add_argument('--samples', type=integer(1, 1024), default=None, metavar='N',
                        help='rays per pixel of the simulated camera, 1-1024 (default: 4; '
                             'focused presets 64, what their detector needs at the rims)')
    parser.add_argument('--timeout', type=real(0, 1e6, low_open=True), default=300.0,
                        help='seconds to wait for each service answer (default: %(default)s)')
    parser.add_argument('--live', nargs='?', type=real(0, 3600, low_open=True), const=10.0,
                        default=None,
                        metavar='SECONDS',
                        help='after the calibration, play the board drifting at camera rate '
                             '(15 Hz) for SECONDS (10 with the flag) and print the decode '
                             "node's rates and its 3-D error against the truth of every frame")
    parser.add_argument('--ideal', action='store_true',
                        help='an ideal simulated sensor (the irradiance itself; default: the '
                             "presets' realistic sensor, docs/simulation.md)")
    from lf_mpc_calib.ros.demo_plan import add_plan_arguments
    add_plan_arguments(parser)


class _Caller:
    """Calls services and waits for messages from the main thread (executor elsewhere)."""

    def __init__(self, node, timeout):
        self.node, self.timeout = node, timeout

    def call(self, name, srv=None):
        from std_srvs.srv import Trigger
        client = self.node.create_client(srv or Trigger, name)
        if not client.wait_for_service(timeout_sec=self.timeout):
            raise RuntimeError(f'service {name} did not appear within {self.timeout} s')
        done = threading.Event()
        future = client.call_async((srv or Trigger).Request())
        future.add_done_callback(lambda _: done.set())
        if not done.wait(self.timeout):
            raise RuntimeError(f'service {name} did not answer within {self.timeout} s')
        self.node.destroy_client(client)
        return future.result()

    def wait(self, predicate, what):
        deadline = time.monotonic() + self.timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError(f'timed out after {self.timeout} s waiting for {what}')
            time.sleep(0.02)


def truth_model(sim, grid, obs, lens_types=None):
    """The optics' MPC model of the simulated camera (a multi-focus one's: weighted by the rays
    of ``obs`` per true lens type, what one model of all types and the zero-mean per-type terms
    refer to; with '-slope' terms ``lens_types``, the truth of rows at the lattice's centres)."""
    from lf_mpc_calib.pipeline.focused_raw import truth_centres
    cam = sim.camera
    if cam.camera_type != 'focused':
        return cam.ground_truth_model(grid)
    return cam.ground_truth_model(weights=_true_type_weights(cam, obs),
                                  centres=truth_centres(lens_types))


def _true_type_weights(cam, obs):
    """(T,) fraction of the rows of ``obs`` per true lens type, or None for one type."""
    if cam.mla.n_types == 1 or len(obs) == 0:
        return None
    from lf_mpc_calib.simulation.focused_raw import lens_types_of
    true = lens_types_of(cam, obs.ijuv[:, :2])
    return np.bincount(true, minlength=cam.mla.n_types) / len(obs)


def _type_lines(session, cam, result):
    """Lines: the told lens types against the simulator's and the per-type terms against the
    optics' truth (labels mapped to the true types)."""
    from lf_mpc_calib.simulation.focused_raw import type_agreement
    types, lt = session.micro_image_types, result.lens_types
    if types is None or lt is None:
        return [f'lens types: one type calibrated (the simulated camera has '
                f'{cam.mla.n_types})'] if cam.mla.n_types > 1 else []
    centres = session.decoder.detector.centres
    true_of, fraction = type_agreement(cam, centres, types)
    from lf_mpc_calib.pipeline.focused_raw import truth_centres
    truth = cam.ground_truth_lens_types(_true_type_weights(cam, session.observations),
                                        centres=truth_centres(lt))
    lines = [f'lens types told from the captures: {100 * fraction:.1f} % of '
             f'{len(types)} micro-images right (labels -> true types {true_of.tolist()})',
             f'{"type":>6} {"scale %":>9} {"± std":>7} {"truth":>7} {"z":>6} '
             f'{"offset px":>16} {"± std":>13} {"truth":>16}']
    for t in range(lt.n_types):
        g = true_of[t]
        z = (lt.scale[t] - truth.scale[g]) / lt.scale_std[t]
        lines.append(f'{t:>6} {100 * lt.scale[t]:+9.3f} {100 * lt.scale_std[t]:7.3f} '
                     f'{100 * truth.scale[g]:+7.3f} {z:+6.1f} {_fmt3(lt.offset_px[t]):>16} '
                     f'{_fmt3(lt.offset_std_px[t]):>13} {_fmt3(truth.offset_px[g]):>16}')
    if lt.terms.endswith('-slope'):
        lines.append(f'{"type":>6} {"slope ppm":>10} {"± std":>7} {"truth":>7} {"z":>6}')
        for t in range(lt.n_types):
            g = true_of[t]
            z = (lt.slope[t] - truth.slope[g]) / lt.slope_std[t]
            lines.append(f'{t:>6} {1e6 * lt.slope[t]:+10.1f} {1e6 * lt.slope_std[t]:7.1f} '
                         f'{1e6 * truth.slope[g]:+7.1f} {z:+6.1f}')
    return lines


def _true_corners(sim, model, index):
    """True board corners (C, 3) of sim pose ``index`` in the calibrated optical frame."""
    return _true_corners_of(sim, model, sim.rvecs[index], sim.tvecs[index])


def _floor(session, sim, model, index):
    """Corner accuracy of sim pose ``index`` with ``model`` and with the true model."""
    from lf_mpc_calib.features.corners import detect_corners
    from lf_mpc_calib.io.images import as_float_image
    from lf_mpc_calib.measurement.accuracy import corner_accuracy
    if session.camera_type == 'focused':   # corners in the micro-images, as the session found
        obs = session.decoder.detect(sim.frame(index), pose=0)[1].observations
        terms, types = getattr(session.result, 'lens_types', None), session.micro_image_types
        truth = truth_model(sim, session.grid, session.observations, terms)
        if terms is not None and types is not None:   # as the decode node: (u, v) corrected
            t = types[session.decoder.detector.lattice.nearest(obs.ijuv[:, :2])]
            obs = dataclasses.replace(obs, ijuv=terms.corrected_ijuv(obs.ijuv, t))
    else:
        lf = dataclasses.replace(session.decoder.decode(as_float_image(sim.frame(index))),
                                 valid=session.use.copy())
        obs = detect_corners(lf, session.board, pose=0).observations
        truth = sim.camera.ground_truth_model(session.grid)
    truth, rot, trans = aligned_truth(truth, model, rotation_matrix(sim.rvecs[index:index + 1]),
                                      sim.tvecs[index:index + 1])
    return corner_accuracy(obs, model, truth, sim.board.points() @ rot[0].T + trans[0],
                           origin=OpticalFrame.of(model, sim.camera.camera_type).origin)


def _cloud_points(msg):
    """(N, 3) xyz and (N,) corner ids of a ~/points PointCloud2."""
    from lf_mpc_calib.ros.messages import cloud_columns
    cols = cloud_columns(msg)
    xyz = np.column_stack([cols['x'], cols['y'], cols['z']]).astype(float)
    return xyz, cols['id'].astype(int)


TRUST_K_PERCENT = 1.0
"""Largest relative error of k_i, k_j, k_u, k_v (%) of a calibration to trust."""
TRUST_PP_PX = 1.0
"""Largest distance of the principal point from the truth (px) of a calibration to trust."""
TRUST_FLOOR_RATIO = 1.5
"""Largest mean 3-D corner error of the decode node over the floor (the same frame measured
with the true model) of a calibration to trust."""


FOCUSED_DEMO_SCALE = 0.7
"""Sensor crop of the focused demo (``--scale``'s default for focused presets; the nodes'
SIM_SCALE is 0.5). A focused camera's principal point rests on the view's extent: its sigma
goes about as 1 / scale^2 (the demo's capture, exact rows at 0.12 px noise: Keplerian (0.56,
0.90) px at 0.5, (0.27, 0.40) at 0.6, (0.21, 0.31) at 0.7, (0.11, 0.16) at 1), and neither
tilts of 42 degrees (sigma unchanged) nor a 16 x 11 board of 30 px squares (jackknife (0.54,
0.79) px) nor 20 poses ((0.40, 0.64)) bring the half-size crop's under the 1 px target's third:
its demo missed it at 0.87 / 1.07 / 1.56 px on seeds 0 / 1 / 2. At 0.7 a frame costs about 2 x
the half size's to render and to detect."""


PLANNED_ARM_DEMO_SCALE = 1.0
"""Sensor crop of ``demo --ros --plan --hand-eye`` with a conventional preset (``--scale``'s
default there). The mount is measured against the optical frame, which the principal point's
uncertainty tilts (k_u x sigma(pp): 0.12 deg per view pixel on the Lytro), and that sigma goes
about as 1 / scale^2. With the mount target a 95 % bound of the error (planning.
MOUNT_CONFIDENCE: sigma <= 0.0124 deg for 0.02 deg), Lytro eye-in-hand seed 0 took 47
captures, 203 s at 0.7 and 4 captures, 49 s at full size (docs/pose-planning.md). (Aiming
the sigma itself at 0.02 deg: at 0.5 40 captures, 1100 s; at 0.7 6-9 captures, 46-141 s.)"""


FOCUSED_SQUARE_PX = 40.0
"""Fewest raw pixels a square of the focused demo's board spans at the farthest pose
(:func:`lf_mpc_calib.simulation.dataset.capture_board`'s ``square_px``). At the nodes'
half-size crop simulate's FOCUSED_SQUARE_PX (55) leaves a 9 x 6 board whose principal point the
10 poses do not determine (Keplerian: sigma 1.0 px; 0.95 / 2.7 / 1.5 px off on seeds 0 / 1 /
2); 40 px gives 13 x 9 (Galilean 14 x 10), which the detector reads at every pose, less the row
``capture_board`` drops from a board with cols + rows even (it looks the same turned by 180
degrees: the decode node's corner ids of a new pose came out turned, 29 mm off, the floor too).
Keplerian seed 1 with 13 x 8: principal point sigma (0.51, 0.83) px, 1.2 px off."""


def focused_poses(camera, board, n, seed):
    """
    (n + 1, 6) board poses (rvec, tvec): the ``n`` of ``simulate --seed seed``'s capture
    (:func:`lf_mpc_calib.simulation.dataset.capture_poses`), then a new one at the geometric
    middle of their depth range (tilted about the board's x axis) for the decode node.
    """
    from lf_mpc_calib.simulation.dataset import capture_depth_range, capture_poses
    rvecs, tvecs = capture_poses(camera, board, n, rng=np.random.default_rng(seed))
    middle = float(np.sqrt(np.prod(capture_depth_range(camera))))
    rv, tv = capture_poses(camera, board, 1, rng=np.random.default_rng([seed, n]),
                           depth_range=(middle, middle))
    return np.hstack([np.vstack([rvecs, rv]), np.vstack([tvecs, tv])])


def trust_verdict(model, truth, floor_ratio, acceptance=None):
    """One line: the calibration against the simulator's truth (``truth`` aligned to
    ``model``) and ``floor_ratio`` (the decode node's corners over the floor), within the
    TRUST_* targets or not; with ``acceptance`` (the session's verdict of
    :mod:`lf_mpc_calib.calibration.acceptance`, the rule calibrate-raw refuses by) "to
    trust" also needs the rule to accept it: a calibration near the truth by luck, whose
    sigmas the rule refuses, is not one to trust."""
    k = 100 * float(np.max(np.abs(model.to_vector()[:4] / truth.to_vector()[:4] - 1.0)))
    pp = float(np.linalg.norm(model.principal_point - truth.principal_point))
    misses = [what for what, bad in (
        (f'k off by more than {TRUST_K_PERCENT:g} %', k > TRUST_K_PERCENT),
        (f'principal point off by more than {TRUST_PP_PX:g} px', pp > TRUST_PP_PX),
        (f'3-D corners over {TRUST_FLOOR_RATIO:g} x the floor',
         floor_ratio > TRUST_FLOOR_RATIO)) if bad]
    if acceptance is not None and not acceptance.accepted:
        misses.append('the acceptance rule refuses it (' + '; '.join(acceptance.refusals)
                      + '), as calibrate-raw on the saved session does')
    return (f'against the truth: k within {k:.2f} %, principal point {pp:.2f} px, 3-D corners '
            f'{floor_ratio:.2f} x the floor: '
            + ('NOT to trust: ' + ', '.join(misses) if misses else
               'a calibration to trust ('
               + ('' if acceptance is None else 'accepted by the rule calibrate-raw applies, ')
               + f'k <= {TRUST_K_PERCENT:g} %, principal point <= '
               f'{TRUST_PP_PX:g} px, corners <= {TRUST_FLOOR_RATIO:g} x the floor)'))


def parameter_table(model, truth, stddev=None, held=()):
    """Lines comparing ``model`` with ``truth`` parameter by parameter (the offline demo's
    table: :func:`lf_mpc_calib.report.calibration.truth_table`)."""
    from lf_mpc_calib.report.calibration import truth_table
    return truth_table(model, truth, stddev, held)


class _Refused(Exception):
    """Options that do not go together: said as ``lf-mpc-calib demo: error: ...``, exit code 2."""


def run(args, out=None):
    """Run the demo; prints to ``out`` (stdout); returns the exit code."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    from lf_mpc_calib.simulation.dataset import capture_board

    out = out or sys.stdout

    def say(text=''):
        print(text, file=out, flush=True)

    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        name, camera, focused = _demo_camera(args, say)
    except _Refused as exc:
        say(f'lf-mpc-calib demo: error: {exc}')
        return 2
    output_dir = Path(args.output_dir or tempfile.mkdtemp(prefix='lf_ros_demo_'))
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = MultiThreadedExecutor(num_threads=6, context=context)
    nodes = []
    thread = None
    try:
        board = capture_board(camera, square_px=FOCUSED_SQUARE_PX if focused else None)
        board_params = _board_parameters(name, camera, board)   # the decode node's as well
        sim_params = _sim_parameters(args, name, camera, board, focused, board_params)
        calib_params = _calib_parameters(args, camera, output_dir, board_params)
        sim, calib, user, dark_params = _create_nodes(context, nodes, args, sim_params,
                                                      calib_params, output_dir, say)
        setup, live = getattr(args, 'hand_eye', None), getattr(args, 'live', None)
        if live is not None:    # the live loop rendered by the worker while calibrating
            sim.queue_motion(args.poses, LIVE_FRAMES, samples=_live_samples(sim))
        tf = None
        if setup:
            from lf_mpc_calib.ros.tf_listener import TfListener
            tf = TfListener(user)
        for node in nodes:
            executor.add_node(node)
        thread = threading.Thread(target=executor.spin, daemon=True)
        thread.start()
        caller = _Caller(user, args.timeout)
        _say_nodes_up(say, caller, sim, calib, start)
        if getattr(args, 'plan', False):
            from lf_mpc_calib.ros.demo_plan import plan_loop
            return plan_loop(caller, sim, calib, args, say, start, truth_model)
        if not _capture_and_calibrate(say, caller, args.poses):
            return 1
        result, truth = _say_recovered(say, sim, calib, args.poses, setup)
        # ---- live measurement of a new pose ----
        new = args.poses
        cal_file = output_dir / 'latest' / f'{calib.camera_name}.yaml'
        measured, ids, source, stamp, clouds, decoder = _measure(
            caller, executor, context, nodes, cal_file, sim, new, say, board_params + dark_params)
        acc = _say_new_pose(say, calib.session, sim, result.model, truth, new, measured, ids,
                            source)
        if setup:
            _say_base_frame(say, caller, tf, sim, measured, ids, stamp, acc)
        if live is not None:
            _live(say, caller, sim, decoder, clouds, result.model, live, acc)
        say(f'\noutputs in {output_dir}; demo took {time.perf_counter() - start:.1f} s (CPU '
            f'{time.process_time() - cpu_start:.1f} s in this process, not counting the '
            'render worker)')
        return 0
    except RuntimeError as exc:
        say(f'lf-mpc-calib demo: error: {exc}')
        return 1
    finally:
        executor.shutdown(timeout_sec=5.0)
        if thread is not None:
            thread.join(timeout=5.0)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def _demo_camera(args, say):
    """The simulated camera of the options: (preset name, its Camera at the demo's crop and
    sensor, whether it is focused). Fills in ``args.plan`` (planned captures without
    --poses, said) and ``args.poses``' default; raises _Refused for options that do not go
    together."""
    from lf_mpc_calib.ros.defaults import SIM_PRESET, SIM_SCALE
    from lf_mpc_calib.simulation.dataset import FOCUSED_CAPTURE_POSES
    from lf_mpc_calib.simulation.optics import IDEAL, preset
    name = getattr(args, 'preset', None) or SIM_PRESET
    focused = preset(name, scale=SIM_SCALE).camera_type == 'focused'
    scale = args.scale if args.scale is not None else \
        FOCUSED_DEMO_SCALE if focused else \
        PLANNED_ARM_DEMO_SCALE if (getattr(args, 'plan', False)
                                   and getattr(args, 'hand_eye', None)) else SIM_SCALE
    ideal = dict(IDEAL) if getattr(args, 'ideal', False) else {}
    camera = preset(name, scale=scale, **ideal)
    if (args.poses is None and not focused and not getattr(args, 'plan', False)
            and not getattr(args, 'hand_eye', None) and getattr(args, 'live', None) is None
            and hasattr(args, 'target_pp_sigma')):
        # a fixed set of 6 random poses leaves the principal point's sigma at 0.6-1 px on
        # the demo's crop, which the acceptance rule refuses (0.5 px): the default plans
        args.plan = True
        say('no --poses given: the captures are planned (--plan) until the calibration is '
            'one the acceptance rule accepts; --poses N captures a fixed set instead')
    if args.poses is None:
        args.poses = FOCUSED_CAPTURE_POSES if focused else 6
    if args.poses < 3:
        raise _Refused('--poses must be at least 3')
    samples = getattr(args, 'samples', None)
    if samples is not None and not 1 <= samples <= 1024:
        raise _Refused(f'--samples must be 1 to 1024 rays per pixel, got {samples}')
    if getattr(args, 'live', None) is not None and (getattr(args, 'hand_eye', None)
                                                    or getattr(args, 'plan', False)):
        raise _Refused('--live does not go with --hand-eye or --plan')
    return name, camera, focused


def _board_parameters(name, camera, board):
    """[board_cols, board_rows, square_size] of the demo's ``board`` for the nodes when the
    camera is not their default (SIM_PRESET at SIM_SCALE, whose capture board they take
    alike); else []."""
    from rclpy.parameter import Parameter

    from lf_mpc_calib.ros.defaults import SIM_PRESET, SIM_SCALE
    # the nodes' default is SIM_SCALE: any other crop, given or a default of this demo
    # (PLANNED_ARM_DEMO_SCALE was never passed on: its runs rendered the 0.5 crop)
    if camera.scale == SIM_SCALE and name == SIM_PRESET:
        return []
    return [Parameter('board_cols', value=board.cols),
            Parameter('board_rows', value=board.rows),
            Parameter('square_size', value=float(board.square))]


def _sim_parameters(args, name, camera, board, focused, board_params):
    """The simulated camera's parameters: [Parameter] (seed, sensor, rays per pixel, the
    poses, --live's rate, the arm, the preset, with ``board_params`` the crop and board,
    --plan's following of the suggestions)."""
    from rclpy.parameter import Parameter

    from lf_mpc_calib.ros.defaults import SIM_PRESET
    plan, setup = getattr(args, 'plan', False), getattr(args, 'hand_eye', None)
    params = [Parameter('seed', value=args.seed)]
    if getattr(args, 'ideal', False):
        params.append(Parameter('ideal_sensor', value=True))
    samples = getattr(args, 'samples', None)
    if samples is not None:
        params.append(Parameter('samples', value=samples))
    if not plan:    # the poses are known: rendered ahead
        params.append(Parameter('render_ahead', value=True))
    if focused and not plan:   # simulate's capture + a new pose
        params.append(Parameter('poses', value=focused_poses(
            camera, board, args.poses, args.seed).ravel().tolist()))
    else:
        params.append(Parameter('num_poses', value=args.poses + 1))
    if getattr(args, 'live', None) is not None:
        params.append(Parameter('rate', value=LIVE_RATE))
    if setup:
        params.append(Parameter('arm', value=setup))
    if name != SIM_PRESET:
        params.append(Parameter('preset', value=name))
    if board_params:    # not the nodes' default camera: its crop and the demo's board
        params += [Parameter('scale', value=float(camera.scale))] + board_params
    if plan:
        params.append(Parameter('follow_suggestions', value=True))
    return params


def _calib_parameters(args, camera, output_dir, board_params):
    """The calibration node's parameters but the dark frame's and --plan's: [Parameter]
    (``output_dir``, made here, and a new session folder made in it, the camera type, the
    lens types, the arm's frames and setup, ``board_params``)."""
    from rclpy.parameter import Parameter
    output_dir.mkdir(parents=True, exist_ok=True)
    session_dir = tempfile.mkdtemp(prefix='session_', dir=output_dir)   # a new session
    params = [Parameter('output_dir', value=str(output_dir)),
              Parameter('session_dir', value=session_dir),
              Parameter('camera_type', value=camera.camera_type)]
    n_types = getattr(args, 'lens_types', None)
    n_types = camera.mla.n_types if n_types is None else n_types
    if n_types != 1:
        params.append(Parameter('lens_types', value=int(n_types)))
    setup = getattr(args, 'hand_eye', None)
    if setup:
        params += [Parameter('base_frame', value='base_link'),
                   Parameter('tool_frame', value='tool0'),
                   Parameter('hand_eye_setup', value=setup)]
    return params + board_params


def _create_nodes(context, nodes, args, sim_params, calib_params, output_dir, say):
    """The simulated camera, the calibration node (with the sensor's dark frame, written into
    ``output_dir``, and --plan's parameters) and the user's node, appended to ``nodes``;
    returns (sim, calib, user, dark_params: [dark_image_file] or [])."""
    import rclpy

    from lf_mpc_calib.ros.calibration_node import CalibrationNode
    from lf_mpc_calib.ros.sim_camera_node import SimCameraNode
    sim = SimCameraNode(context=context, parameter_overrides=sim_params)
    dark_params = _dark_parameters(sim, output_dir)
    calib_params = calib_params + dark_params
    if dark_params:
        say(f'dark frame of the simulated sensor (lens capped): {dark_params[0].value}, '
            'subtracted by the calibration and decode nodes (dark_image_file)')
    if getattr(args, 'plan', False):
        from lf_mpc_calib.ros.demo_plan import plan_parameters
        calib_params += plan_parameters(args, sim, output_dir)
    calib = CalibrationNode(context=context, parameter_overrides=calib_params)
    user = rclpy.create_node('lf_demo_user', context=context)
    nodes += [sim, calib, user]
    return sim, calib, user, dark_params


def _say_nodes_up(say, caller, sim, calib, start):
    """Say the simulated camera and board, wait for the calibration node's lenslet grid
    from the white image and say its size."""
    cam = sim.camera
    say(f'simulated camera {cam.name} {cam.sensor.width}x{cam.sensor.height} px, board '
        f'{sim.board.cols}x{sim.board.rows} x {sim.board.square * 1e3:.2f} mm; nodes '
        f'lf_sim_camera, lf_calibration up ({time.perf_counter() - start:.1f} s)')
    caller.wait(lambda: calib.session.ready, 'the white image and lenslet grid')
    say(f'lenslet grid from white_image: {calib.session.grid.shape[0]}x'
        f'{calib.session.grid.shape[1]} lenses')


def _capture_and_calibrate(say, caller, poses):
    """Capture sim poses 0 .. ``poses`` - 1 (~/next_pose between them), calibrate and save;
    returns whether the calibration succeeded (then saved)."""
    for k in range(poses):
        if k:
            caller.call('/lf_sim_camera/next_pose')
        answer = caller.call('/lf_calibration/capture')
        say(f'  capture {k}: {answer.message.split("; corners per view")[0]}')
    answer = caller.call('/lf_calibration/calibrate')
    say(f'calibrate: {answer.message}')
    if not answer.success:
        return False
    say(f'save: {caller.call("/lf_calibration/save").message}')
    return True


def _say_recovered(say, sim, calib, poses, setup):
    """The calibration of the first ``poses`` sim poses against the simulated optics' truth:
    the parameter table, the principal point, the lens types and, on an arm (``setup``), the
    mount. Returns (the node's published result, the true MPCModel aligned to its model)."""
    cam = sim.camera
    result = calib.session.published_result   # joint with the mount on an arm
    captured = slice(0, poses)
    truth, _, _ = aligned_truth(truth_model(sim, calib.session.grid,
                                            calib.session.observations,
                                            getattr(result, 'lens_types', None)),
                                result.model,
                                rotation_matrix(sim.rvecs[captured]),
                                sim.tvecs[captured])
    say('\nrecovered vs ground truth (simulated optics):')
    for line in parameter_table(result.model, truth, result.stddev, result.held):
        say(line)
    say(f'principal point {_fmt_px(result.model.principal_point)} px, truth '
        f'{_fmt_px(truth.principal_point)} px')
    for line in _type_lines(calib.session, cam, result):
        say(line)
    if setup:
        from lf_mpc_calib.ros.demo_plan import say_mount
        say_mount(say, calib.session.hand_eye, sim.arm.in_calibrated_frame(
            cam.ground_truth_model(calib.session.grid), result.model),
            OpticalFrame.of(result.model, cam.camera_type))
    return result, truth


def _say_new_pose(say, session, sim, model, truth, index, measured, ids, source):
    """The decode node's corners of sim pose ``index`` (``measured`` (N, 3) of corner ids
    ``ids`` (N,), from ``source``) against the true ones in the optical frame, the floor
    (the same frame detected here, measured with the true model) and the trust verdict;
    returns the floor's corner accuracy."""
    cam = sim.camera
    expected = _true_corners(sim, model, index)
    err_mm = np.linalg.norm(measured - expected[ids], axis=1) * 1e3
    dist = np.linalg.norm(expected.mean(axis=0)) * 1e3
    z_mm = float(expected[ids, 2].mean()) * 1e3
    where = (f'board at z = {z_mm:.0f} mm in the optical frame (as on ~/points), {dist:.0f} '
             'mm from its origin')
    if cam.camera_type == 'focused':   # the origin: the main lens (docs/file-formats.md)
        where += ', the main lens'
    where += f'; the optics put it at z = {_optics_z_mm(sim, index, ids):.0f} mm'
    say(f'\nnew pose {index} measured by {source}: {len(ids)} corners, {where}')
    say(f'{"corner":>6} {"measured (mm)":>28} {"truth (mm)":>28} {"error":>9}')
    for k in range(min(6, len(ids))):
        say(f'{ids[k]:6d} {_fmt(measured[k])} {_fmt(expected[ids[k]])} '
            f'{err_mm[k]:6.2f} mm')
    say(f'3-D error: mean {err_mm.mean():.2f} mm, max {err_mm.max():.2f} mm '
        f'({err_mm.mean() / dist * 100:.2f} % of the distance)')
    acc = _floor(session, sim, model, index)
    say(f'floor: the same frame decoded and detected here, {acc.summary()}')
    say(trust_verdict(model, truth, err_mm.mean() / float(np.mean(acc.floor_mm)),
                      session.acceptance))
    return acc


def _say_base_frame(say, caller, tf, sim, measured, ids, stamp, acc):
    """Corners measured in the optical frame taken into the base frame through TF, against
    the true corners in the base frame and the optical-frame floor."""
    from lf_mpc_calib.camera import transforms
    from lf_mpc_calib.errors import InvalidInputError
    arm, optical = sim.arm, sim.truth.frames['optical']
    stamp_ns = stamp.sec * 1_000_000_000 + stamp.nanosec
    caller.wait(lambda: tf.buffer.newest_stamp_ns() >= stamp_ns, 'the arm state on /tf')
    try:
        with tf.lock:
            base_optical = tf.buffer.lookup(arm.base_frame, optical, stamp_ns)
    except InvalidInputError as exc:
        raise RuntimeError(f'no {arm.base_frame} -> {optical} transform: {exc}') from None
    in_base = transforms.apply(base_optical, measured)
    board_in_base = arm.board if arm.setup == 'eye-in-hand' else transforms.compose(
        (sim.robot_rvecs[sim.pose_index], sim.robot_tvecs[sim.pose_index]), arm.board)
    expected = transforms.apply(board_in_base, sim.board.points())[ids]
    err = np.linalg.norm(in_base - expected, axis=1) * 1e3
    floor = float(np.mean(acc.floor_mm))
    say(f'\ncorners in {arm.base_frame} through TF ({arm.base_frame} -> {arm.tool_frame} on '
        f'/tf, the mount on /tf_static): {len(ids)} corners, mean error {err.mean():.3f} mm '
        f'(max {err.max():.3f} mm) vs the floor {floor:.3f} mm: {err.mean() / floor:.2f} x '
        'the floor')


def _fmt(p):
    return f'({p[0] * 1e3:8.2f} {p[1] * 1e3:8.2f} {p[2] * 1e3:8.2f})'


def _fmt_px(p):
    return f'({p[0]:.2f}, {p[1]:.2f})'


def _fmt3(p):
    return f'({p[0]:+.3f}, {p[1]:+.3f})'


def _dark_parameters(sim, folder):
    """[dark_image_file] for the other nodes: the simulated sensor's dark frame written to
    ``folder``/dark.png, as a user captures one with the lens capped; [] on an ideal sensor."""
    from rclpy.parameter import Parameter

    from lf_mpc_calib.io.atomic import write_atomically
    from lf_mpc_calib.io.images import write_image
    if sim.dark is None:
        return []
    path = Path(folder) / 'dark.png'
    write_atomically(path, lambda tmp: write_image(tmp, sim.dark))
    return [Parameter('dark_image_file', value=str(path))]


def _measure(caller, executor, context, nodes, cal_file, sim, index, say, node_params):
    """Measured corners (N, 3), ids (N,) and the source's name for sim pose ``index``.
    ``node_params``: the decode node's board and dark frame (then its white is the raw one of
    ``white_image``: the session's white.png has the dark frame subtracted already)."""
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import PointCloud2

    from lf_mpc_calib.ros.decode_node import DecodeNode
    # show the new pose first: the decode node, started after, sees only its frames
    caller.call('/lf_sim_camera/next_pose')
    clouds = []
    nodes[2].create_subscription(PointCloud2, '/lf_decoder/points', clouds.append,
                                 QoSProfile(depth=5))
    dark = any(q.name == 'dark_image_file' for q in node_params)
    white = [] if dark else [
        Parameter('white_image_file', value=str(cal_file.parent / 'white.png'))]
    decoder = DecodeNode(context=context, parameter_overrides=[
        Parameter('calibration_file', value=str(cal_file))] + white + node_params)
    nodes.append(decoder)
    executor.add_node(decoder)
    say(f'decode node lf_decoder started on {cal_file.name}; pose {index} shown')
    caller.wait(lambda: any(m.width * m.height > 0 for m in clouds),
                'board corners on /lf_decoder/points')
    clouds[:] = [m for m in clouds if m.width * m.height > 0]
    xyz, ids = _cloud_points(clouds[-1])
    stamp = clouds[-1].header.stamp
    stats = decoder.last_stats
    if stats:
        stages = ', '.join(f'{k} {v:.0f}' for k, v in stats['stages_ms'].items())
        say(f'lf_decoder: {stats["latency_ms"]:.0f} ms per frame ({stages} ms)')
    return xyz, ids, 'lf_decoder (/lf_decoder/points)', stamp, clouds, decoder


LIVE_RATE = 15.0
"""Frames per second of the simulated camera with ``--live``."""

LIVE_FRAMES = 24
"""Frames of the live loop of the board drifting around its pose."""

LIVE_SAMPLES = 16
"""Rays per pixel of the live loop's frames: at the focused default of 64 the 24 frames took
190 s to render on the shared 2-core machine (load 14), at 16 63 s, with the same live 3-D
error (0.86 mm mean, 1.06 x the still frame's floor, both). The loop is rendered by the
simulated camera's worker process after the capture's frames, while the calibration runs
(:meth:`SimCameraNode.queue_motion`): rendered in-process beside the decode node it took 116 s
on a quiet machine (0.73 s a frame alone)."""


def _live_samples(sim):
    """Rays per pixel of the live loop's frames: LIVE_SAMPLES, or fewer when the camera's are
    fewer."""
    return min(LIVE_SAMPLES, sim.params['samples'])


def _live(say, caller, sim, decoder, clouds, model, seconds, acc):
    """The live phase (module docstring): the board drifting at camera rate for ``seconds``."""
    t0 = time.perf_counter()
    sim.start_motion(LIVE_FRAMES, samples=_live_samples(sim))
    say(f'\nlive: the board drifts around pose {sim.pose_index} in a loop of {LIVE_FRAMES} '
        f'frames at {LIVE_RATE:g} Hz (rendered in {time.perf_counter() - t0:.1f} s); '
        f'measuring for {seconds:g} s')
    # the first drifting frame needs a full search (seconds); the window starts once tracked
    before = decoder.last_stats.get('frames', {}).get('processed', 0)
    caller.wait(lambda: _tracked(decoder.last_stats.get('corners', ''))
                and decoder.last_stats.get('frames', {}).get('processed', 0) > before + 1,
                'the decode node tracking the drifting board')
    first = decoder.last_stats.get('frames', {}).get('processed', 0)
    dropped = decoder.last_stats.get('frames', {}).get('dropped', 0)
    clouds.clear()
    searches = []
    end = time.monotonic() + seconds

    def sample():
        searches.append(decoder.last_stats.get('corners', ''))
        return time.monotonic() > end
    caller.wait(sample, 'the live window')
    stats = decoder.last_stats
    counts = stats.get('frames', {})
    errors, matched = [], 0
    for msg in list(clouds):
        if msg.width * msg.height == 0:
            continue
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        pose = sim.true_pose_at(stamp_ns)
        if pose is None:
            continue
        xyz, ids = _cloud_points(msg)
        expected = _true_corners_of(sim, model, *pose)
        errors.append(np.linalg.norm(xyz - expected[ids], axis=1).mean() * 1e3)
        matched += 1
    processed = counts.get('processed', 0) - first
    say(f'lf_decoder: {processed} frames processed in {seconds:g} s ({processed / seconds:.1f} '
        f'frames/s; ~/rate {stats.get("rate_hz", 0):.1f} Hz), '
        f'{counts.get("dropped", 0) - dropped} dropped (newest first), latency '
        f'{stats.get("latency_ms", float("nan")):.0f} ms ('
        + ', '.join(f'{k} {v:.0f}' for k, v in stats.get('stages_ms', {}).items()) + ' ms)')
    tracked = sum(_tracked(s) for s in searches)
    say(f'corners: tracked in {tracked} of {len(searches)} looks at ~/stats; last: '
        f'{stats.get("corners", "")!r}')
    if errors:
        floor = float(np.mean(acc.floor_mm))
        say(f'3-D error against each frame\'s true board: mean {np.mean(errors):.2f} mm over '
            f'{matched} frames with corners (max of the per-frame means '
            f'{np.max(errors):.2f} mm); the still frame\'s floor {floor:.2f} mm')
    else:
        say('no live frame with corners was matched to its true pose')


def _tracked(corners):
    """Whether ~/stats' ``corners`` says the board was followed (tracked or re-acquired from
    its last place: docs/focused-live.md), not searched for in full."""
    return corners.startswith(('tracked', 're-acquired'))


def _optics_z_mm(sim, index, ids):
    """Mean z (mm) of corners ``ids`` of sim pose ``index`` in the optics' own frame (main
    lens at the origin, z its axis): what the optical frame's z is to be."""
    rot, trans = sim.camera.pose_to_physical(sim.rvecs[index], sim.tvecs[index])
    return float((sim.board.points()[ids] @ rot.T + trans)[:, 2].mean()) * 1e3


def _true_corners_of(sim, model, rvec, tvec):
    """True board corners (C, 3) of the board at (rvec, tvec) in the calibrated optical frame
    (that of ~/points: :mod:`lf_mpc_calib.camera.optical_frame`)."""
    truth = sim.camera.ground_truth_model(sim.camera.lenslet_grid())
    _, rot, trans = aligned_truth(truth, model, rotation_matrix(np.asarray(rvec)[None]),
                                  np.asarray(tvec)[None])
    frame = OpticalFrame.of(model, sim.camera.camera_type)
    return frame.points(sim.board.points() @ rot[0].T + trans[0])


def main(argv=None):
    """``python -m lf_mpc_calib.ros.demo``."""
    parser = argparse.ArgumentParser(prog='lf_mpc_calib.ros.demo', description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == '__main__':
    sys.exit(main())

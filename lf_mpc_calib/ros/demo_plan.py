"""
``lf-mpc-calib demo --ros --plan``: captures planned in a closed loop through the nodes.

The simulated camera runs with ``follow_suggestions`` (it shows the board at each pose on the
calibration node's latched ``~/suggested_pose``); the calibration node plans with the
simulator's design model (``nominal_model_file``: written from the simulated optics, what a
datasheet would give) until its first calibration, then with its calibration, within the
simulator's capture constraints (depth range, given in the optical frame, tilt; focused
presets: ``plan_focus_band``, the band kept clear around the plane conjugate to the
micro-lenses; their suggestions are in the optical frame at the main lens, k_3 + k_4 > 0, in
which a focused calibration reports too, and the capture log's "board at N m" is the board's
distance from the main lens). The loop:
``~/suggest`` -> the board moves -> ``~/capture`` (-> ``~/calibrate`` once ``min_poses`` are in,
so that the next suggestion rests on the measured model and corner noise), until a suggestion
says the captures so far meet the targets (``--target-k-sigma`` %, ``--target-pp-sigma`` px)
or ``--max-captures`` are taken. Then it calibrates and prints the captures used, the sigmas
the planner predicted against those the calibration reports, and the errors against the
simulator's truth; on an arm (``--hand-eye``) also the mount, whose reported sigmas must meet
the node's mount targets for the target to count as met.
"""

import json

import numpy as np

from lf_mpc_calib.camera.optical_frame import OpticalFrame

SCALES = ('k_i', 'k_j', 'k_u', 'k_v')
PP = ('principal_point_u', 'principal_point_v')


def add_plan_arguments(parser):
    """The closed loop's options (``lf-mpc-calib demo --ros --plan``)."""
    from lf_mpc_calib.cli.numbers import integer, real
    parser.add_argument('--plan', action='store_true',
                        help='with --ros: capture where the calibration node suggests '
                             '(~/suggest) until the target sigmas are reached')
    parser.add_argument('--target-k-sigma', type=real(0, 100, low_open=True), default=0.3,
                        metavar='PCT',
                        help='with --plan: sigma(k_i..k_v) aimed at, %% (default: '
                             '%(default)s)')
    parser.add_argument('--target-pp-sigma', type=real(0, 1e3, low_open=True), default=0.3,
                        metavar='PX',
                        help='with --plan: sigma(principal point) aimed at, px (default: '
                             '%(default)s)')
    parser.add_argument('--max-captures', type=integer(1, 10000), default=20, metavar='N',
                        help='with --plan: captures taken at most (default: %(default)s)')


def plan_parameters(args, sim, output_dir):
    """The calibration node's parameters of the loop (the nominal model file written into
    ``output_dir``)."""
    from rclpy.parameter import Parameter

    from lf_mpc_calib.io.calibration_file import save_calibration
    from lf_mpc_calib.simulation.planning_scene import planning_constraints
    if not (args.target_k_sigma > 0 and args.target_pp_sigma > 0 and args.max_captures >= 3):
        raise RuntimeError(f'--plan: expected targets > 0 and --max-captures >= 3, got '
                           f'{args.target_k_sigma}, {args.target_pp_sigma}, '
                           f'{args.max_captures}')
    nominal = output_dir / 'nominal_model.yaml'
    save_calibration(nominal, sim.truth)
    model, constraints = planning_constraints(sim.camera)
    # the planner's constraints are in the model's frame; the node takes the optical frame's
    depths = OpticalFrame.of(model, sim.camera.camera_type).depths(constraints.depth_range_m)
    params = [Parameter('nominal_model_file', value=str(nominal)),
              Parameter('target_k_sigma', value=float(args.target_k_sigma)),
              Parameter('target_pp_sigma', value=float(args.target_pp_sigma)),
              Parameter('plan_depth_range', value=[float(v) for v in depths]),
              Parameter('plan_max_tilt_deg', value=float(constraints.max_tilt_deg)),
              Parameter('plan_seed', value=int(args.seed))]
    if constraints.excluded_depths_m is not None:   # focused: clear of the conjugate plane
        params.append(Parameter('plan_focus_band',
                                value=float(constraints.excluded_depths_m[1])))
    return params


def _sigmas_text(sig):
    k = max((sig[q] for q in SCALES if sig[q] is not None), default=None)
    p = max((sig[q] for q in PP if sig[q] is not None), default=None)
    if k is None or p is None:
        return 'undetermined'
    return f'k {k:.3g} %, principal point {p:.3g} px'


def _miss_line(suggestion, reported):
    """One line: the sigmas the suggestion predicted after its capture against those the
    calibration with it reports (the worst quantity's predicted / reported - 1), and
    whether the suggestion flagged its prediction (``prediction_note``)."""
    pred = suggestion['predicted_sigma_after']
    known = [q for q in SCALES + PP if pred.get(q) is not None and reported[q] > 0]
    if not known:
        return '    predicted before it: undetermined'
    q = max(known, key=lambda n: abs(pred[n] / reported[n] - 1))
    flag = suggestion.get('prediction_note')
    return (f'    predicted before it / reported: worst {q} {pred[q]:.3g} / {reported[q]:.3g} '
            f'({pred[q] / reported[q] - 1:+.0%})' + ('; flagged not to trust' if flag else ''))


def plan_loop(caller, sim, calib, args, say, start, truth_model):
    """Suggest -> move -> capture until the target; prints the outcome; returns the exit
    code (0: calibrated, whether or not the target was reached, which it says).
    truth_model(sim, grid, observations, lens_types): the simulator's true MPCModel."""
    import time

    from lf_mpc_calib.calibration.closed_form import aligned_truth
    from lf_mpc_calib.camera.rotations import rotation_matrix
    from lf_mpc_calib.pipeline.capture_planning import reported_sigmas
    min_poses = calib.session.min_poses
    say(f'closed loop: target sigma(k) <= {args.target_k_sigma} %, sigma(principal point) '
        f'<= {args.target_pp_sigma} px, at most {args.max_captures} captures')
    loop = _capture_as_suggested(caller, sim, calib, args, say)
    if loop is None:
        return 1
    captured, asked, suggestion, followed = loop
    reached = bool(suggestion['reached'])
    say(f'captures used: {len(captured)} (target {"reached" if reached else "NOT reached"}: '
        f'sigmas {_sigmas_text(suggestion["sigma_now"])} as the {suggestion["model"]} model '
        'predicts)')
    if len(captured) < min_poses:
        say(f'fewer than {min_poses} captures: nothing to calibrate')
        return 1
    answer = caller.call('/lf_calibration/calibrate')
    say(f'calibrate: {answer.message.split("; pose set")[0]}')
    if not answer.success:
        return 1
    result = calib.session.published_result
    _say_depths(say, result, asked, sim)
    truth = truth_model(sim, calib.session.grid, calib.session.observations,
                        getattr(result, 'lens_types', None))
    truth, _, _ = aligned_truth(truth, result.model, rotation_matrix(sim.rvecs[captured]),
                                sim.tvecs[captured])
    reported = reported_sigmas(result)
    met = (all(reported[q] <= args.target_k_sigma for q in SCALES)
           and all(reported[q] <= args.target_pp_sigma for q in PP))
    if sim.arm is not None:     # the mount is part of the target on an arm
        met = met and _mount_met(calib)
    _say_sigma_table(say, followed, reported, _truth_errors(result.model, truth))
    if sim.arm is not None:
        _say_arm(say, sim, calib, result, suggestion, followed)
    say(f'\ncaptures used: {len(captured)}; target predicted: {"yes" if reached else "no"}; '
        f'met by the sigmas the calibration reports: {"yes" if met else "no"}; demo took '
        f'{time.perf_counter() - start:.1f} s')
    return 0


def _capture_as_suggested(caller, sim, calib, args, say):
    """The loop itself: ask ~/suggest, wait for the board there, capture (and calibrate once
    ``min_poses`` are in), until a suggestion says the target is reached or
    ``--max-captures`` are in (or twice as many attempts). Returns (captured: the sim pose
    index of each kept capture, asked: its suggested board-centre depth in m, optical frame,
    the last suggestion, the one the last kept capture followed or None), or None when
    ~/suggest fails (said)."""
    from lf_mpc_calib.pipeline.capture_planning import reported_sigmas
    min_poses = calib.session.min_poses
    captured, attempts, suggestion, followed, suggested = [], 0, None, None, 0
    asked = []                  # each kept capture's suggested board-centre depth (optical)
    while True:
        reply = caller.call('/lf_calibration/suggest')
        if not reply.success:
            say(f'suggest: {reply.message}')
            return None
        suggestion = json.loads(reply.message)
        suggested += 1                          # the camera moves to each one
        if suggestion['reached'] or len(captured) >= args.max_captures \
                or attempts >= 2 * args.max_captures:
            break
        caller.wait(lambda: sim.followed >= suggested, 'the board at the suggested pose')
        attempts += 1
        answer = caller.call('/lf_calibration/capture')
        pose = suggestion['board_pose']
        z_asked, z_shown = _centre_depth(pose, sim.board), _shown_depth(sim)
        say(f'  capture {len(captured)}: board at {pose["translation_m"][2]:.3f} m, centre '
            f'{z_asked:.4f} m, shown at {z_shown:.4f} m '
            f'({suggestion["model"]} model; sigmas now {_sigmas_text(suggestion["sigma_now"])},'
            f' predicted after {_sigmas_text(suggestion["predicted_sigma_after"])}): '
            f'{answer.message.split("; corners per view")[0]}')
        if not answer.success:
            continue
        captured.append(sim.pose_index)
        asked.append(z_asked)
        followed = suggestion                   # the suggestion the last capture followed
        if len(captured) >= min_poses:
            cal = caller.call('/lf_calibration/calibrate')
            if not cal.success:
                say(f'    calibrate: {cal.message.split("; pose set")[0]}')
            else:
                say(_miss_line(suggestion, reported_sigmas(calib.session.published_result)))
    caller.wait(lambda: sim.followed >= suggested, 'the board at the last suggested pose')
    return captured, asked, suggestion, followed


def _truth_errors(model, truth):
    """{quantity: |error|} of SCALES (% of the true value) and PP (px) of ``model`` against
    ``truth`` (aligned to it)."""
    errors = {n: 100 * abs(getattr(model, n) / getattr(truth, n) - 1) for n in SCALES}
    errors.update(zip(PP, (float(e) for e in np.abs(
        np.asarray(model.principal_point) - truth.principal_point))))
    return errors


def _say_sigma_table(say, followed, reported, errors):
    """The table of SCALES and PP: the sigma predicted before the last capture (by the
    suggestion it ``followed``), the sigma the calibration reports, the |error| against the
    truth and |error| / sigma."""
    say('\npredicted: before the last capture, for the captures with it; reported: by the '
        'calibration; |error|: against the truth (% of the value; px)')
    say('quantity            predicted   reported  |error|  |error|/sigma')
    for q in SCALES + PP:
        pred = followed['predicted_sigma_after'][q]
        pred = f'{pred:9.4f}' if pred is not None else '        -'
        say(f'{q:18s} {pred}  {reported[q]:9.4f} {errors[q]:8.4f} '
            f'{errors[q] / reported[q]:10.2f}')


def _centre_depth(pose, board):
    """Board-centre depth (m) of a pose {'rotation_vector', 'translation_m'}: the same for the
    detector's numbering of a symmetric board, whose origin may be another corner."""
    from lf_mpc_calib.calibration.planning import pose_geometry
    return pose_geometry(np.asarray(pose['rotation_vector']),
                         np.asarray(pose['translation_m']), board.points())[0]


def _shown_depth(sim):
    """Board-centre depth (m) where the simulated camera shows its current board, in the
    optical frame a calibration reports (its <camera>_true_board TF)."""
    from lf_mpc_calib.simulation.planning_scene import in_optical_frame
    k = sim.pose_index
    rv, tv = in_optical_frame(sim.truth.model, sim.rvecs[k], sim.tvecs[k],
                              sim.camera.camera_type)
    return _centre_depth({'rotation_vector': rv, 'translation_m': tv}, sim.board)


def _say_depths(say, result, asked, sim):
    """The suggested board-centre depths against those of the calibration's poses of the same
    captures, both in the optical frame (a frame mismatch shows as 1/k_3 for a focused
    camera)."""
    frame = OpticalFrame.of(result.model, sim.camera.camera_type)
    rv, tv = frame.poses(result.rotation_vectors, result.translations)
    gaps = [abs(_centre_depth({'rotation_vector': r, 'translation_m': t}, sim.board)
                - asked[int(k)]) * 1e3
            for r, t, k in zip(rv, tv, result.pose_ids) if int(k) < len(asked)]
    if gaps:
        say(f'suggested board-centre depths against the calibration\'s poses (optical frame): '
            f'within {max(gaps):.2f} mm over {len(gaps)} captures')


def _mount_met(calib):
    """Whether the solved mount's reported sigmas meet the node's mount targets: MOUNT_CONFIDENCE
    x each sigma (its 95 % error bound) within the target."""
    from lf_mpc_calib.calibration.planning import MOUNT_CONFIDENCE
    from lf_mpc_calib.pipeline.capture_planning import reported_mount_sigmas
    he = calib.session.hand_eye
    if he is None:
        return False
    sig = reported_mount_sigmas(he)
    return (MOUNT_CONFIDENCE * sig['mount_translation']
            <= calib.params['target_mount_translation']
            and MOUNT_CONFIDENCE * sig['mount_rotation']
            <= calib.params['target_mount_rotation'])


def _say_arm(say, sim, calib, result, suggestion, followed):
    """On the simulated arm: the mount against the truth (and the sigma predicted before the
    last capture), and where the arm's true chain puts the board at the last suggestion's
    tool pose (calibrated optical frame, the suggestion's; corners compared as sets, the
    detector may number a symmetric board otherwise)."""
    he = calib.session.hand_eye
    if he is None:
        say('\nhand-eye mount not solved (see the calibrate answer): no tool pose suggested')
        return
    truth = sim.arm.in_calibrated_frame(sim.camera.ground_truth_model(calib.session.grid),
                                        result.model)
    say_mount(say, he, truth, OpticalFrame.of(result.model, sim.camera.camera_type))
    say(f'  mount target {calib.params["target_mount_translation"]:g} mm, '
        f'{calib.params["target_mount_rotation"]:g} deg: '
        f'{"met" if _mount_met(calib) else "NOT met"} by the reported sigmas (95 %: 1.614 x '
        'each within it)')
    pred = followed['predicted_sigma_after'] if followed else {}
    if pred.get('mount_translation') is not None and pred.get('mount_rotation') is not None:
        say(f'  mount sigma predicted before the last capture: {pred["mount_translation"]:.3f}'
            f' mm, {pred["mount_rotation"]:.4f} deg')
    tool = (suggestion.get('arm') or {}).get('tool_pose_in_base')
    if tool is None:
        say('no tool pose in the last suggestion')
        return
    from scipy.spatial.transform import Rotation
    pose, pts = suggestion['board_pose'], sim.board.points()
    shown = truth.board_poses(np.array(tool['rotation_vector']), np.array(tool['translation_m']))
    at = OpticalFrame.of(result.model, sim.camera.camera_type).points(     # model -> optical
        Rotation.from_rotvec(shown[0][0]).apply(pts) + shown[1][0])
    asked = Rotation.from_rotvec(pose['rotation_vector']).apply(pts) + pose['translation_m']
    gap = np.linalg.norm(at[:, None] - asked[None], axis=2).min(axis=1) * 1e3
    say(f'last suggested tool pose ({tool["frame_id"]} -> {tool["child_frame_id"]}): the '
        f'arm\'s true chain shows the board there within {gap.max():.2f} mm of the suggestion '
        f'(mean {gap.mean():.2f} mm over its corners)')


def say_mount(say, he, truth, frame=None):
    """Print the recovered mount against the arm's truth (in the calibrated frame), both
    parent -> the calibration's optical frame ``frame`` (OpticalFrame, as the file and TF
    have it; None: the model's)."""
    from lf_mpc_calib.camera import transforms
    if frame is not None:
        he, truth = he.in_optical_frame(frame), truth.in_optical_frame(frame)
    err_deg, err_t = transforms.difference(he.mount, truth.mount)
    sd_t = np.linalg.norm(he.mount_stddev[1]) * 1e3
    sd_r = np.degrees(np.linalg.norm(he.mount_stddev[0]))
    say(f'\nhand-eye mount ({he.setup}), recovered vs the arm\'s truth:')
    say(f'  translation {_mm(he.mount[1])} mm vs {_mm(truth.mount[1])} mm')
    say(f'  rotation vector {np.round(he.mount[0], 5)} vs {np.round(truth.mount[0], 5)}')
    say(f'  mount error {np.linalg.norm(err_t) * 1e3:.3f} mm, {err_deg[0]:.4f} deg (sigma '
        f'{sd_t:.3f} mm, {sd_r:.4f} deg); closed form ({he.closed_form_method}) then joint '
        f'refinement: RMS {he.rms_reprojection_px:.4f} px')


def _mm(p):
    return f'({p[0] * 1e3:8.2f} {p[1] * 1e3:8.2f} {p[2] * 1e3:8.2f})'

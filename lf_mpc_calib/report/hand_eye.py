"""
The report of a hand-eye calibration: text summary and plots of a HandEyeResult.

``write_hand_eye_report(he, out_dir)`` writes

- ``hand_eye.txt``: the mount and the board's pose with standard deviations, the closed-form
  methods against the refinement, the motion-diversity figures, the intrinsics refined jointly
  with the mount and how far they moved from the camera-only calibration
  (:func:`hand_eye_summary`);
- ``hand_eye_poses.png``: the camera's optical frames along the arm in the base frame
  (eye-in-hand: one per capture, with the tool flange; eye-to-hand: the fixed camera and the
  board at every capture), the board outline, 3-D;
- ``hand_eye_residuals.png``: RMS reprojection per capture of the hand-eye refinement against
  the free-pose calibration, and the reprojection RMS of each closed-form method.
"""

from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.camera import transforms
from lf_mpc_calib.report.figures import pyplot
from lf_mpc_calib.io.atomic import write_atomically, write_text_atomically


def _fmt3(v, scale=1.0):
    return '[' + ', '.join(f'{scale * x:+.5f}' for x in np.asarray(v).reshape(3)) + ']'


def hand_eye_summary(he, *, truth=None, title=''):
    """
    Multi-line text summary. ``truth``: an ArmSetup (simulation) in the calibrated optical
    frame (:meth:`lf_mpc_calib.simulation.arm.ArmSetup.in_calibrated_frame`), whose errors
    are then listed.
    """
    mount = 'T_tool_optical' if he.setup == 'eye-in-hand' else 'T_base_optical'
    board = 'T_base_board' if he.setup == 'eye-in-hand' else 'T_tool_board'
    lines = [title, '=' * len(title)] if title else []
    lines += [f'Hand-eye ({he.setup}), {len(he.pose_ids)} captures; {he.diversity.message}',
              f'{mount}: rotation vector {_fmt3(he.mount[0])} rad  (sd '
              f'{_fmt3(he.mount_stddev[0])}), translation {_fmt3(he.mount[1], 1e3)} mm (sd '
              f'{_fmt3(he.mount_stddev[1], 1e3)})',
              f'{board}: rotation vector {_fmt3(he.board[0])} rad  (sd '
              f'{_fmt3(he.board_stddev[0])}), translation {_fmt3(he.board[1], 1e3)} mm (sd '
              f'{_fmt3(he.board_stddev[1], 1e3)})',
              f'RMS reprojection: hand-eye {he.rms_reprojection_px:.4f} px, free-pose '
              f'calibration {he.calibration_rms_px:.4f} px',
              'Closed forms (cv2.calibrateHandEye; * started the refinement):']
    for name, e in he.closed_form.items():
        err = ''
        if truth is not None:
            dr, dt = transforms.difference(e.mount, truth.mount)
            err = f', mount error {dr[0]:.4f} deg {1e3 * np.linalg.norm(dt):.3f} mm'
        lines.append(f'  {"*" if name == he.closed_form_method else " "} {name:<11}RMS '
                     f'{e.rms_reprojection_px:.4f} px, board spread {e.rotation_spread_deg:.4f} '
                     f'deg {e.translation_spread_mm:.3f} mm{err}')
    if truth is not None:
        dr, dt = transforms.difference(he.mount, truth.mount)
        lines.append(f'Refined mount error: {dr[0]:.4f} deg, {1e3 * np.linalg.norm(dt):.3f} mm '
                     f'({_fmt3(dt[0], 1e3)} mm)')
    shift = he.extras.get('intrinsics_shift')
    if shift is None:
        lines.append("Intrinsics: held at the camera-only calibration's")
    else:
        m, sd = he.model, he.model_stddev
        lines.append('Intrinsics (the calibration file\'s): ' + shift.summary())
        lines.append('  joint: ' + '  '.join(
            f'{k}={getattr(m, k):.6g}' + (f' (sd {sd[k]:.2g})' if np.isfinite(sd[k]) else '')
            for k in sd))
    lines.append(f'Solver: {he.iterations} evaluations, {he.message}')
    return '\n'.join(lines) + '\n'


def _axes(ax, w, t, length, colours=('r', 'g', 'b'), lw=1.5):
    r = Rotation.from_rotvec(np.asarray(w).reshape(3)).as_matrix()
    for k in range(3):
        e = t + length * r[:, k]
        ax.plot([t[0], e[0]], [t[1], e[1]], [t[2], e[2]], colours[k], lw=lw)


def plot_hand_eye_poses(he, path, *, board_points=None, title=''):
    """Save the optical frames (and tool frames) along the arm in the base frame (3-D)."""
    plt = pyplot()
    fig = plt.figure(figsize=(7, 6))
    ax = fig.add_subplot(projection='3d')
    cams = he.optical_in_base()
    robot = (he.robot_rvecs, he.robot_tvecs)
    if he.setup == 'eye-in-hand':
        board_base = [he.board]
    else:
        board_base = list(zip(*transforms.compose(robot, he.board)))
    pts = [cams[1], robot[1]] + [b[1][None] for b in board_base]
    extent = np.ptp(np.vstack(pts), axis=0).max() or 0.1
    length = 0.08 * extent
    for w, t in zip(*cams):
        _axes(ax, w, t, length)
    ax.plot(*robot[1].T, 'k.--', lw=0.7, label='tool flange (base -> tool)')
    for w, t in zip(*robot):
        _axes(ax, w, t, 0.5 * length, colours=('0.6', '0.6', '0.6'), lw=1)
    if board_points is not None:
        bp = np.asarray(board_points, float)
        for w, t in board_base:
            q = transforms.apply((w, t), bp)
            ax.plot(q[:, 0], q[:, 1], q[:, 2], 'm.', ms=1)
    ax.plot(*cams[1].T, 'bo', ms=3, label='optical frames (x r, y g, z b)')
    ax.set_xlabel('x (m)')
    ax.set_ylabel('y (m)')
    ax.set_zlabel('z (m)')
    ax.legend(loc='upper left', fontsize=8)
    ax.set_title(title or f'{he.setup}: camera poses in the base frame')
    fig.tight_layout()
    write_atomically(path, lambda p: fig.savefig(p, dpi=100))
    plt.close(fig)
    return Path(path)


def plot_hand_eye_residuals(he, path, *, calibration_per_pose=None):
    """Save per-capture RMS (hand-eye vs calibration) and the closed forms' RMS (bars)."""
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    k = np.arange(len(he.pose_ids))
    a1.bar(k - 0.2, he.per_capture_rms_px, 0.4, label='hand-eye (one rigid set-up)')
    if calibration_per_pose is not None:
        a1.bar(k + 0.2, calibration_per_pose, 0.4, label='calibration (free board poses)')
    a1.set_xticks(k)
    a1.set_xticklabels([str(int(p)) for p in he.pose_ids])
    a1.set_xlabel('capture (pose id)')
    a1.set_ylabel('RMS reprojection (px)')
    a1.legend(fontsize=8)
    names = list(he.closed_form)
    vals = [he.closed_form[n].rms_reprojection_px for n in names] + [he.rms_reprojection_px]
    a2.bar(np.arange(len(vals)), vals,
           color=['C1' if n == he.closed_form_method else 'C7' for n in names] + ['C0'])
    a2.set_xticks(np.arange(len(vals)))
    a2.set_xticklabels(names + ['refined'], rotation=30)
    a2.set_ylabel('RMS reprojection (px)')
    a2.set_title('closed forms (orange: started the refinement) vs refined')
    fig.tight_layout()
    write_atomically(path, lambda p: fig.savefig(p, dpi=100))
    plt.close(fig)
    return Path(path)


def write_hand_eye_report(he, out_dir, *, board_points=None, calibration=None, truth=None,
                          title=''):
    """Write hand_eye.txt, hand_eye_poses.png, hand_eye_residuals.png; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = out / 'hand_eye.txt'
    write_text_atomically(text, hand_eye_summary(he, truth=truth, title=title))
    per_pose = None
    if calibration is not None:
        ids = np.asarray(calibration.pose_ids)
        per_pose = np.asarray(calibration.per_pose_rms_px)[np.searchsorted(ids, he.pose_ids)]
    return [text, plot_hand_eye_poses(he, out / 'hand_eye_poses.png', board_points=board_points),
            plot_hand_eye_residuals(he, out / 'hand_eye_residuals.png',
                                    calibration_per_pose=per_pose)]

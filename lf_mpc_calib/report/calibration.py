"""
A calibration report: text summary and PNG plots of a CalibrationResult.

``write_report(result, out_dir)`` writes

- ``summary.txt``: parameters with standard deviations, errors, iterations, solver message,
  per-pose RMS (:func:`summary_text`);
- ``poses.png``: the board poses in the camera frame (3-D);
- ``per_view_rms.png``: RMS reprojection error per view as a heatmap over the (i, j) grid
  (conventional cameras, the paper's Table 10), or for focused cameras a scatter of the
  micro-image centres coloured by their RMS;
- ``residuals.png``: the residuals (du, dv) as a scatter and the histogram of their length;
- with a leave-one-pose-out jackknife (:mod:`lf_mpc_calib.calibration.pose_jackknife`):
  its sigmas in the summary and ``pose_influence.png``, how far the principal point and k_u
  move without each pose.

The result is used through its attributes only (model, rotation_vectors, translations,
pose_ids, residuals_px, rms_reprojection_px, rms_ray_reprojection_mm, per_pose_rms_px,
view_ids, per_view_rms_px, stddev, iterations, converged, message; ``fixed`` and ``method``
if present). matplotlib's Agg backend is used; nothing is shown on screen.
"""

from pathlib import Path

import numpy as np

from lf_mpc_calib.camera.model import PARAMETER_NAMES
from lf_mpc_calib.camera.rotations import rotation_matrix
from lf_mpc_calib.report.figures import pyplot
from lf_mpc_calib.io.atomic import write_atomically, write_text_atomically


def truth_in_calibration_frame(truth, model):
    """``truth`` (MPCModel) in the frame of the calibrated ``model``: the single conversion of
    the demo, the ROS demo and the reports
    (:func:`~lf_mpc_calib.calibration.closed_form.aligned_truth`, poses left out)."""
    from lf_mpc_calib.calibration.closed_form import aligned_truth
    return aligned_truth(truth, model, np.eye(3)[None], np.zeros((1, 3)))[0]


def truth_table(model, truth, stddev=None, held=()):
    """
    Lines comparing ``model`` with ``truth`` parameter by parameter, as the demos print them.

    ``truth`` must already be in the calibration's frame (:func:`truth_in_calibration_frame`);
    stddev {name: sigma}; held: names the calibration held (their sigma column says 'held').
    The error is relative (%) where the truth is not 0, else the difference.
    """
    lines = [f'{"parameter":>10} {"estimate":>14} {"± std":>11} {"truth":>14} {"error":>10}']
    for name in PARAMETER_NAMES:
        est, true = getattr(model, name), getattr(truth, name)
        std = (stddev or {}).get(name, float('nan'))
        std = f'{"held":>11}' if name in held or not np.isfinite(std) else f'{std:11.2e}'
        rel = f'{abs(est - true) / abs(true) * 100:8.3f} %' if abs(true) > 1e-12 else \
            f'{est - true:10.2e}'
        lines.append(f'{name:>10} {est:14.6e} {std} {true:14.6e} {rel:>10}')
    return lines


def summary_text(result, *, truth=None, title='', jackknife=None):
    """
    Return a multi-line text summary of ``result``.

    With ``truth`` (an MPCModel, e.g. the simulator's, in its own frame) the relative error of
    every parameter is listed too, the truth first expressed in the calibration's frame by
    :func:`~lf_mpc_calib.calibration.closed_form.aligned_truth` (the demo's conversion: a
    simulated sensor read out turned by 180 degrees has k_i, u_0, ... of the other sign); with
    ``jackknife`` (a PoseJackknife of ``result``) its sigmas beside the residuals' ones.
    """
    lines = []
    if title:
        lines += [title, '=' * len(title)]
    fixed = set(getattr(result, 'fixed', ()) or ())
    head = f'{"parameter":<10}{"value":>16}{"stddev":>13}'
    if truth is not None:
        truth = truth_in_calibration_frame(truth, result.model)
        head += f'{"truth":>16}{"rel. error":>12}'
    lines.append(head)
    for name in PARAMETER_NAMES:
        value = getattr(result.model, name)
        sd = result.stddev.get(name, float('nan'))
        row = f'{name:<10}{value:>16.8g}'
        held = getattr(result, 'held', {}) or {}
        row += (f'{"held at 0":>13}' if name in held else f'{"fixed":>13}' if name in fixed
                else f'{sd:>13.3g}')
        if truth is not None:
            t = getattr(truth, name)
            rel = f'{abs(value - t) / abs(t) * 100:>11.4f}%' if t != 0 else f'{"-":>12}'
            row += f'{t:>16.8g}{rel}'
        lines.append(row)
    if truth is not None:
        lines.append('truth: the simulator\'s, in the calibration\'s camera frame')
    for name, reason in (getattr(result, 'held', {}) or {}).items():
        lines.append(f'{name}: {reason}')
    lines.append('')
    lines.append(f'RMS reprojection error:     {result.rms_reprojection_px:.6g} px')
    lines.append(f'RMS ray re-projection error: {result.rms_ray_reprojection_mm:.6g} mm')
    n_rays = int(np.asarray(result.residuals_px).shape[0])
    lines.append(f'rays: {n_rays}, poses: {len(result.pose_ids)}, '
                 f'views: {np.asarray(result.view_ids).shape[0]}')
    method = getattr(result, 'method', None)
    if method:
        lines.append(f'closed form: {method}')
    lines.append(f'iterations: {result.iterations}, converged: {result.converged}')
    lines.append(f'solver: {result.message}')
    lines.append('')
    lines.append('per-pose RMS (px):')
    for pid, rms in zip(result.pose_ids, result.per_pose_rms_px):
        lines.append(f'  pose {int(pid):>3}: {rms:.4f}')
    if jackknife is not None:
        lines += [''] + jackknife.summary()
    return '\n'.join(lines) + '\n'


def plot_pose_influence(jackknife, path, *, title=''):
    """Bars: how far the principal point (px) and k_u (in its residual sigmas) move when each
    pose is left out, with the residual sigma of the principal point marked."""
    plt = pyplot()
    jk, full = jackknife, jackknife.full
    shift = jk.principal_point_shifts()
    x = np.arange(len(jk.pose_ids))
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.bar(x - 0.2, shift[:, 0], 0.4, label='x')
    a.bar(x + 0.2, shift[:, 1], 0.4, label='y')
    sd = float(np.hypot(*full.principal_point_stddev()))
    a.axhline(sd, color='k', ls=':', lw=1, label='residual sigma')
    a.axhline(-sd, color='k', ls=':', lw=1)
    a.set_xticks(x, [str(int(p)) for p in jk.pose_ids])
    a.set_xlabel('pose left out')
    a.set_ylabel('principal point shift (px)')
    a.legend(fontsize=8)
    if 'k_u' in jk.names:
        k = jk.names.index('k_u')
        b.bar(x, (jk.estimates[:, k] - full.model.k_u) / full.stddev['k_u'])
        b.set_ylabel('k_u shift / residual sigma')
    b.set_xticks(x, [str(int(p)) for p in jk.pose_ids])
    b.set_xlabel('pose left out')
    fig.suptitle(title or 'leave-one-pose-out')
    fig.tight_layout()
    write_atomically(path, lambda p: fig.savefig(p, dpi=110))
    plt.close(fig)
    return Path(path)


def _is_view_grid(view_ids):
    ids = np.asarray(view_ids, dtype=float)
    return ids.size > 0 and np.all(ids == np.round(ids)) and np.ptp(ids, axis=0).max() < 100


def plot_poses(result, path, *, board=None, title='', camera_type='conventional'):
    """Plot the board (or each pose's origin and axes, without ``board``) in the camera's
    optical frame (of ``camera_type``), the camera at the origin."""
    from lf_mpc_calib.camera.optical_frame import OpticalFrame
    plt = pyplot()
    fig = plt.figure(figsize=(6, 5))
    ax = fig.add_subplot(projection='3d')
    rv = np.asarray(result.rotation_vectors, dtype=float).reshape(-1, 3)
    tr = OpticalFrame.of(result.model, camera_type).points(
        np.asarray(result.translations, dtype=float).reshape(-1, 3))
    scale = 1.0
    pts_all = [np.zeros((1, 3))]
    if board is not None:
        board = np.asarray(board, dtype=float).reshape(-1, 3)
        scale = float(np.ptp(board, axis=0).max()) or 1.0
    else:
        scale = 0.2 * float(np.median(np.abs(tr[:, 2]))) if len(tr) else 1.0
    cmap = plt.get_cmap('viridis')
    for n, (r, t, pid) in enumerate(zip(rv, tr, result.pose_ids)):
        rot = rotation_matrix(r)
        colour = cmap(n / max(1, len(rv) - 1))
        if board is not None:
            p = board @ rot.T + t
            ax.scatter(p[:, 0], p[:, 2], -p[:, 1], s=2, color=colour)
            pts_all.append(p)
        axes = (np.eye(3) * 0.3 * scale) @ rot.T
        for a, c in zip(axes, 'rgb'):
            ax.plot([t[0], t[0] + a[0]], [t[2], t[2] + a[2]], [-t[1], -t[1] - a[1]], color=c)
        ax.text(t[0], t[2], -t[1], str(int(pid)), fontsize=7)
        pts_all.append(t[None])
    ax.scatter([0], [0], [0], marker='^', color='k', s=40)
    ax.set_xlabel('x (m)')
    ax.set_ylabel('z (m)')
    ax.set_zlabel('-y (m)')
    pts = np.concatenate(pts_all)
    centre = (pts.max(0) + pts.min(0)) / 2
    half = max(np.ptp(pts, axis=0).max() / 2, 1e-9)
    ax.set_xlim(centre[0] - half, centre[0] + half)
    ax.set_ylim(centre[2] - half, centre[2] + half)
    ax.set_zlim(-centre[1] - half, -centre[1] + half)
    ax.set_title(title or 'board poses in the camera frame')
    fig.tight_layout()
    write_atomically(path, lambda p: fig.savefig(p, dpi=110))
    plt.close(fig)
    return path


def plot_per_view_rms(result, path, *, title=''):
    """Plot per-view RMS: a heatmap over the (i, j) view grid, or a micro-image scatter."""
    plt = pyplot()
    ids = np.asarray(result.view_ids, dtype=float).reshape(-1, 2)
    rms = np.asarray(result.per_view_rms_px, dtype=float).ravel()
    fig, ax = plt.subplots(figsize=(6, 5))
    # colour scale to the 99th percentile: a few outlier views would otherwise flatten it
    vmax = float(np.percentile(rms, 99)) if rms.size else None
    if _is_view_grid(ids):
        i0, j0 = ids.min(0).astype(int)
        ni, nj = (np.ptp(ids, axis=0).astype(int) + 1)
        grid = np.full((nj, ni), np.nan)
        grid[ids[:, 1].astype(int) - j0, ids[:, 0].astype(int) - i0] = rms
        im = ax.imshow(grid, origin='upper', cmap='viridis', vmax=vmax,
                       extent=(i0 - 0.5, i0 + ni - 0.5, j0 + nj - 0.5, j0 - 0.5))
        if ni * nj <= 225:
            for (i, j), r in zip(ids, rms):
                ax.text(i, j, f'{r:.2f}', ha='center', va='center', fontsize=6, color='w')
        ax.set_xlabel('view i')
        ax.set_ylabel('view j')
    else:
        im = ax.scatter(ids[:, 0], ids[:, 1], c=rms, s=6, cmap='viridis', vmax=vmax)
        ax.invert_yaxis()
        ax.set_aspect('equal')
        ax.set_xlabel('micro-image centre x (px)')
        ax.set_ylabel('micro-image centre y (px)')
    fig.colorbar(im, ax=ax, label='RMS reprojection error (px)', extend='max')
    ax.set_title(title or 'RMS reprojection error per view')
    fig.tight_layout()
    write_atomically(path, lambda p: fig.savefig(p, dpi=110))
    plt.close(fig)
    return path


def plot_residuals(result, path, *, title=''):
    """Plot the residuals (N, 2) as a scatter and the histogram of their lengths."""
    plt = pyplot()
    res = np.asarray(result.residuals_px, dtype=float).reshape(-1, 2)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.5))
    sample = res if len(res) <= 50000 else res[np.linspace(0, len(res) - 1, 50000).astype(int)]
    a1.scatter(sample[:, 0], sample[:, 1], s=1, alpha=0.3)
    lim = max(float(np.abs(res).max()) if res.size else 1.0, 1e-9)
    a1.set_xlim(-lim, lim)
    a1.set_ylim(lim, -lim)
    a1.set_aspect('equal')
    a1.set_xlabel('du (px)')
    a1.set_ylabel('dv (px)')
    a1.set_title('residuals')
    a2.hist(np.hypot(res[:, 0], res[:, 1]), bins=60)
    a2.set_xlabel('|residual| (px)')
    a2.set_ylabel('rays')
    a2.set_title(f'RMS {result.rms_reprojection_px:.4f} px')
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    write_atomically(path, lambda p: fig.savefig(p, dpi=110))
    plt.close(fig)
    return path


def write_report(result, out_dir, *, board=None, title='', truth=None, jackknife=None,
                 camera_type='conventional'):
    """
    Write summary.txt and the PNG plots of ``result`` into ``out_dir``; return their paths.

    board (M, 3) board points in the board frame (metres) for the pose plot; truth an
    MPCModel to compare the parameters with in the summary; jackknife a PoseJackknife of
    ``result`` (its sigmas in the summary, pose_influence.png); camera_type: the poses are
    plotted in its optical frame (:mod:`lf_mpc_calib.camera.optical_frame`: a focused
    camera's main lens at the origin, every board at z > 0).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    summary = out / 'summary.txt'
    write_text_atomically(summary, summary_text(result, truth=truth, title=title,
                                                jackknife=jackknife))
    paths.append(summary)
    if jackknife is not None:
        paths.append(plot_pose_influence(jackknife, out / 'pose_influence.png', title=title))
    paths.append(plot_poses(result, out / 'poses.png', board=board, title=title,
                            camera_type=camera_type))
    paths.append(plot_per_view_rms(result, out / 'per_view_rms.png'))
    paths.append(plot_residuals(result, out / 'residuals.png', title=title))
    return paths

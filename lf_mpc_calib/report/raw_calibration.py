"""
The report of a raw-image calibration (``calibrate-raw``): the calibration report
(:mod:`lf_mpc_calib.report.calibration`) plus what the front end found in each frame.
"""

from pathlib import Path

import numpy as np

from lf_mpc_calib.report.calibration import write_report
from lf_mpc_calib.report.figures import pyplot
from lf_mpc_calib.report.grid import plot_grid
from lf_mpc_calib.io.atomic import write_atomically, write_text_atomically


def detection_summary(run):
    """Multi-line text: per frame, kept (pose index, counts) or skipped (reason)."""
    lines = [f'Frames: {len(run.pose_frames)} kept, {len(run.skipped)} skipped']
    for k, (path, det) in enumerate(run.detections):
        d = det.diagnostics
        if 'views_used' not in d:     # focused camera: corners in micro-images
            lines.append(f'  pose {k}: {path.name}: {len(det.observations)} observations, '
                         f'{d["corners_found"]}/{d["corners_total"]} corners in '
                         f'{d["median_views"]:.0f} micro-images (median), inverse virtual '
                         f'depth {d["inverse_virtual_depth"]:+.3f}, fit residual RMS '
                         f'{d["fit_residual_rms_px"]:.3f} px')
            continue
        lines.append(f'  pose {k}: {path.name}: {len(det.observations)} observations, '
                     f'{d["corners_found"]}/{d["corners_total"]} corners, '
                     f'{d["views_used"]}/{d["views_available"]} views, line residual RMS '
                     f'{d["line_residual_rms_px"]:.3f} px, dropped {d["off_line"]} off-line, '
                     f'{d["low_contrast"]} low-contrast, {d["moved_too_far"]} unstable')
    for path, reason in run.skipped:
        lines.append(f'  skipped {path.name}: {reason}')
    d = getattr(run, 'determination', None)
    if d is not None:
        lines.append('Determination: sigma ' + ', '.join(
            f'{n} {v:.2f} %' for n, v in d.sigma_pct.items())
            + ', principal point ({:.2f}, {:.2f}) px'.format(*d.sigma_principal_point_px))
        lines += [f'  NOT DETERMINED (accepted on request): {r}' for r in d.refusals]
        lines += [f'  WARNING: {w}' for w in d.warnings]
    verdict = getattr(run, 'acceptance', None)
    if verdict is not None:     # the one rule (calibration.acceptance)
        lines.append(f'Acceptance: {verdict.summary()}')
    if run.observations.lens_type is not None:
        lines += ['Residuals per micro-lens type:'] + [
            '  ' + line for line in lens_type_residuals(run.result, run.observations)]
    t = run.timings
    lines.append('Timings: ' + ', '.join(f'{k} {v:.2f} s' for k, v in t.items()))
    return '\n'.join(lines) + '\n'


def lens_type_residuals(result, obs):
    """Lines 'lens type T: N rays, RMS x px' per micro-lens type ([] without lens types)."""
    if obs.lens_type is None:
        return []
    sq = np.einsum('nk,nk->n', result.residuals_px, result.residuals_px)
    lines = []
    for t in np.unique(obs.lens_type):
        m = obs.lens_type == t
        lines.append(f'lens type {int(t)}: {int(m.sum())} rays, RMS reprojection '
                     f'{np.sqrt(sq[m].mean()):.4f} px')
    return lines


def plot_detections(image, central_uv, board, path, *, title=''):
    """Save the central view with the detected corners, corner 0 and the board axes marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 6 * image.shape[0] / image.shape[1]))
    ax.imshow(image, cmap='gray')
    uv = np.asarray(central_uv)
    ok = np.isfinite(uv[:, 0])
    ax.plot(uv[ok, 0], uv[ok, 1], 'o', ms=4, mfc='none', mec='lime')
    if ok[0]:
        ax.plot(uv[0, 0], uv[0, 1], 'o', ms=8, mfc='none', mec='red')
        for other, colour, name in ((1, 'red', 'x'), (board.cols, 'cyan', 'y')):
            if ok[other]:
                d = uv[other] - uv[0]
                ax.annotate('', xy=uv[0] + 2 * d, xytext=uv[0],
                            arrowprops={'arrowstyle': '->', 'color': colour})
                ax.text(*(uv[0] + 2.3 * d), name, color=colour)
    ax.set_title(title or f'{int(ok.sum())}/{len(uv)} corners')
    ax.set_axis_off()
    fig.tight_layout()
    write_atomically(path, lambda p: fig.savefig(p, dpi=100))
    plt.close(fig)
    return Path(path)


def write_raw_report(run, report_dir, *, jackknife=None):
    """
    The calibration report (with ``jackknife``, a PoseJackknife of ``run.result``, its sigmas
    and pose_influence.png) plus detections.txt, the lenslet grid over a crop of the white image
    (grid.png) and detection overlays (one PNG per pose).
    """
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    title = run.name or 'calibrate-raw'
    paths = list(write_report(run.result, out, board=run.board.points(), title=title,
                              truth=run.truth, jackknife=jackknife,
                              camera_type=run.camera_type))
    text = detection_summary(run)
    det_txt = out / 'detections.txt'
    write_text_atomically(det_txt, text)
    paths.append(det_txt)
    summary = out / 'summary.txt'
    if summary.is_file():
        write_text_atomically(summary, summary.read_text() + '\n' + text)
    if run.white is not None:
        from lf_mpc_calib.io.images import read_float_image
        paths.append(plot_grid(read_float_image(run.white), run.grid, out / 'grid.png'))
    for k, (path, det) in enumerate(run.detections):
        if det.reference_image is None:
            continue
        paths.append(plot_detections(det.reference_image, det.central_uv, run.board,
                                     out / f'detections_{k:03d}_{path.stem}.png',
                                     title=f'pose {k}: {path.name}'))
    return paths

"""
The report of ``lf-mpc-calib verify``: summary.txt, verification.yaml and a plot of the
per-pose figures against what the calibration predicts.
"""

from pathlib import Path

import numpy as np
import yaml

from lf_mpc_calib.io.atomic import write_text_atomically


def plot_pose_figures(v, path, *, title=''):
    """Per pose: RMS (with the calibration's and the limit), square errors and flatness with
    their predicted spreads. Writes ``path`` (PNG)."""
    from lf_mpc_calib.report.figures import pyplot
    plt = pyplot()
    ids = [c.pose for c in v.poses]
    x = np.arange(len(ids))
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].bar(x, [c.rms_px for c in v.poses], color='tab:blue')
    ax[0].axhline(v.noise_px, color='k', lw=1, label='calibration RMS')
    ax[0].axhline(v.figures[0].limit, color='tab:red', ls='--', lw=1, label='limit')
    ax[0].set(title='RMS reprojection (pose fitted)', ylabel='px')
    ax[1].errorbar(x - 0.1, [c.square_expected_mm for c in v.poses],
                   [3 * c.square_spread_mm for c in v.poses], fmt='_', color='tab:blue',
                   label='triangulated: predicted')
    ax[1].plot(x - 0.1, [c.square_error_mm for c in v.poses], 'o', color='tab:blue',
               label='triangulated')
    ax[1].errorbar(x + 0.1, [c.fitted_square_error_mm for c in v.poses],
                   [3 * c.fitted_square_noise_mm for c in v.poses], fmt='s', color='tab:orange',
                   label='fitted on the pixels (+- 3 sigma of its noise)')
    ax[1].axhline(0.0, color='k', lw=1)
    ax[1].set(title='square size error (3 sigma bars)', ylabel='mm')
    ax[2].errorbar(x, [c.flatness_expected_mm for c in v.poses],
                   [3 * c.flatness_spread_mm for c in v.poses], fmt='_', color='k',
                   label='predicted')
    ax[2].plot(x, [c.flatness_mm for c in v.poses], 'o', color='tab:green', label='measured')
    ax[2].set(title='flatness (RMS from plane)', ylabel='mm')
    for a in ax:
        a.set_xticks(x)
        a.set_xticklabels([str(i) for i in ids])
        a.set_xlabel('pose')
        a.legend(fontsize=7)
    fig.suptitle(f'{title}{": " if title else ""}{"passes" if v.passed else "does not pass"}')
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_verification_report(v, out_dir, *, title='', header=()):
    """Write summary.txt (``header`` lines, then v.summary()), verification.yaml and
    poses.png (when a pose was measured) into ``out_dir``; returns the written paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / 'summary.txt', out / 'verification.yaml']
    write_text_atomically(written[0], '\n'.join(list(header) + v.summary()) + '\n')
    write_text_atomically(written[1], yaml.safe_dump(v.to_dict(), sort_keys=False))
    if v.poses:
        plot_pose_figures(v, out / 'poses.png', title=title)
        written.append(out / 'poses.png')
    return written

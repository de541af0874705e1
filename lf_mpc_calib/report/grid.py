"""A picture of a fitted micro-image grid over a crop of its white image (for checking by eye)."""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.report.figures import pyplot
from lf_mpc_calib.io.atomic import write_atomically


def plot_grid(white, grid, path, *, centre=None, size=120, measured=None, estimate=None):
    """
    Write a PNG of the grid's centres (and lattice rows) over a crop of the white image.

    white (H, W) or (H, W, 3) image; grid a LensletGrid for it; path the PNG file; centre
    (x, y) px of the square crop of ``size`` px (default: the image centre); measured
    (N, 2) optional measured micro-image centres (drawn as crosses); estimate: the
    GridEstimate, whose residuals over the whole image are drawn beside the crop (arrows, 20 x)
    with the spot scatter and the lattice error apart in the title. Returns ``path``.
    """
    plt = pyplot()
    img = np.asarray(white)
    if img.ndim == 3:
        img = img[:, :, :3].mean(axis=2)
    if img.ndim != 2:
        raise InvalidInputError(f'white must have shape (H, W) or (H, W, 3), got {img.shape}')
    h, w = img.shape
    if (w, h) != tuple(grid.image_size):
        raise InvalidInputError(f'the grid is for {grid.image_size[0]} x {grid.image_size[1]} '
                                f'px images, the white image is {w} x {h}')
    cx, cy = ((w - 1) / 2.0, (h - 1) / 2.0) if centre is None else (float(c) for c in centre)
    half = int(size) // 2
    x0, x1 = max(0, int(cx) - half), min(w, int(cx) + half)
    y0, y1 = max(0, int(cy) - half), min(h, int(cy) + half)
    if estimate is None:
        fig, ax = plt.subplots(figsize=(7, 7), dpi=110)
    else:
        fig, (ax, ax_res) = plt.subplots(1, 2, figsize=(14, 7), dpi=110)
        _plot_residuals(ax_res, estimate)
    ax.imshow(img[y0:y1, x0:x1], cmap='gray', extent=(x0 - 0.5, x1 - 0.5, y1 - 0.5, y0 - 0.5),
              interpolation='nearest')
    kl = grid.indices()
    xy = grid.centres_of(kl)
    box = (xy[:, 0] >= x0 - 1) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0 - 1) & (xy[:, 1] <= y1)
    # lattice rows as lines through the centres of each row
    for row in np.unique(kl[box, 1]):
        sel = box & (kl[:, 1] == row)
        order = np.argsort(kl[sel, 0])
        ax.plot(xy[sel][order, 0], xy[sel][order, 1], '-', color='tab:cyan', lw=0.5)
    ax.plot(xy[box, 0], xy[box, 1], 'o', ms=3, mfc='none', mec='tab:red', label='grid')
    if measured is not None:
        m = np.asarray(measured, dtype=float).reshape(-1, 2)
        inb = (m[:, 0] >= x0) & (m[:, 0] < x1) & (m[:, 1] >= y0) & (m[:, 1] < y1)
        ax.plot(m[inb, 0], m[inb, 1], 'x', ms=4, color='tab:green', label='measured')
    ax.set_xlim(x0 - 0.5, x1 - 0.5)
    ax.set_ylim(y1 - 0.5, y0 - 0.5)
    deformed = '' if grid.deformation is None else f', deformed (degree ' \
        f'{grid.deformation.degree})'
    ax.set_title(f'{grid.lattice} grid, pitch {grid.pitch:.3f} px, rotation '
                 f'{np.degrees(grid.rotation):.3f} deg, {grid.shape[0]} x {grid.shape[1]} '
                 f'lenses{deformed}', fontsize=9)
    ax.legend(loc='upper right', fontsize=8)
    fig.tight_layout()
    write_atomically(str(path), lambda p: fig.savefig(p))
    plt.close(fig)
    return path


def _plot_residuals(ax, estimate):
    """Residual arrows of the measured centres against the grid over the whole image, drawn
    so that the 90th percentile is 1.5 lens spacings long."""
    q = estimate.quality
    c, r = estimate.centres, estimate.residuals
    step = max(1, len(c) // 1500)
    c, r = c[::step], r[::step]
    norm = np.hypot(r[:, 0], r[:, 1])
    gain = 1.5 * q.nn_px * step ** 0.5 / max(float(np.percentile(norm, 90)), 1e-3)
    ax.quiver(c[:, 0], c[:, 1], gain * r[:, 0], gain * r[:, 1], norm, angles='xy',
              scale_units='xy', scale=1.0, cmap='viridis', width=0.002)
    w, h = estimate.grid.image_size
    ax.set_xlim(-0.5, w - 0.5)
    ax.set_ylim(h - 0.5, -0.5)
    ax.set_aspect('equal')
    ax.set_title(f'residuals x {gain:.0f} ({q.estimator} centres, RMS {q.rms_px:.3f} px)\n'
                 f'the spots scatter {q.spot_scatter_px:.3f} px; the lattice explains them to '
                 f'{q.lattice_error_px:.3f} px beyond that', fontsize=9)

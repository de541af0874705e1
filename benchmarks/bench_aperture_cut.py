"""
Which side is right about the main-lens aperture's cut of a defocused micro-image's bundles:
the renderer's rays or the detector's correction model (features.aperture_bias)?

A ray from sub-pixel offset d through micro-lens point e (unit disk) of a pixel u px from the
micro-image's centre passes the aperture when |u + d + rho e| <= R (R the aperture image's
radius, rho the bundle's) and reads the scene at d - blur e; a pixel reads the scene off its
chief ray by the kept rays' mean of d - blur e (radial component printed, px). Reference: a
continuous pixel and lens (200 000 random points, 10 batches). Compared: the renderer's 64
points shared by every pixel (before), the same points turned per pixel (simulation.render.
pixel_turns, now), and the correction model's 32 lens x 4 sub-pixel points. Columns are means
over the pixels of a 1-px band of |u|; seconds to run.

    OMP_NUM_THREADS=1 python3 benchmarks/bench_aperture_cut.py [--R 9 --rho 3.7 --blur -1.5]

Measured 27 Nov (ratio to the reference, band by band, about 1 s): R 9, rho 3.7, blur -1.5:
shared 0.81-0.94, turned 0.98-1.06, model 0.98-1.02; R 11, rho 3.9, blur 2: shared
0.94-1.12, turned 1.00-1.04, model 1.01-1.02. The model is right; the shared pattern was the
wrong side (its error the same in every micro-image), and the turned one matches.
"""

import argparse

import numpy as np

from lf_mpc_calib.features.aperture_bias import bundle_points
from lf_mpc_calib.simulation.render import pixel_turns, sample_pattern


def read_shift(u, d, e, rho, r_ap, blur):
    """(n,) radial mean read offset (px) of the kept rays; u (n, 2) pixel offsets, d (S, 2)
    sub-pixel offsets, e (n, S, 2) or (S, 2) lens points."""
    e = np.broadcast_to(e, (len(u),) + np.shape(e)[-2:])
    kept = np.square(u[:, None, :] + d + rho * e).sum(-1) <= r_ap * r_ap
    out = u / np.hypot(*u.T)[:, None]
    shift = np.einsum('nsk,nk->ns', d - blur * e, out)
    return (shift * kept).sum(1) / np.maximum(kept.sum(1), 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--R', type=float, default=9.0, help='aperture image radius px')
    ap.add_argument('--rho', type=float, default=3.7, help='bundle radius px')
    ap.add_argument('--blur', type=float, default=-1.5, help='signed blur radius px')
    a = ap.parse_args()
    g = np.arange(-int(a.R + a.rho) - 2, int(a.R + a.rho) + 3, dtype=float)
    pix = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    u = pix - [0.3, 0.17]
    r = np.hypot(*u.T)
    keep = (r > a.R - a.rho + 0.3) & (r < a.R + a.rho - 1.0)
    pix, u, r = pix[keep], u[keep], r[keep]
    rng = np.random.default_rng(1)
    refs = []
    for _ in range(10):
        n = 20000
        rad, phi = np.sqrt(rng.uniform(size=n)), rng.uniform(0, 2 * np.pi, n)
        e = np.column_stack([rad * np.cos(phi), rad * np.sin(phi)])
        refs.append(read_shift(u, rng.uniform(-0.5, 0.5, (n, 2)), e, a.rho, a.R, a.blur))
    ref = np.mean(refs, axis=0)
    p = sample_pattern(64)
    c, s = pixel_turns(pix[:, 0], pix[:, 1])
    e = p[:, 2:]
    turned = np.stack([c[:, None] * e[:, 0] - s[:, None] * e[:, 1],
                       s[:, None] * e[:, 0] + c[:, None] * e[:, 1]], -1)
    sub = np.array([[-0.25, -0.25], [0.25, -0.25], [-0.25, 0.25], [0.25, 0.25]])
    cols = {'shared 64': read_shift(u, p[:, :2], e, a.rho, a.R, a.blur),
            'turned 64': read_shift(u, p[:, :2], turned, a.rho, a.R, a.blur),
            'model 32x4': read_shift(u, np.tile(sub, (32, 1)),
                                     np.repeat(bundle_points(32), 4, axis=0),
                                     a.rho, a.R, a.blur)}
    print(f'R {a.R} px, rho {a.rho} px, blur {a.blur} px: mean radial read shift (px) / '
          f'ratio to the continuous reference')
    print(f'{"|u| px":>9s} {"reference":>10s} ' + ' '.join(f'{k:>17s}' for k in cols))
    bands = np.floor(r - (a.R - a.rho))
    for b in np.unique(bands):
        s = bands == b
        lo = a.R - a.rho + b
        print(f'{lo:4.1f}-{lo + 1:4.1f} {ref[s].mean():+10.4f} ' + ' '.join(
            f'{v[s].mean():+9.4f} ({v[s].mean() / ref[s].mean():5.3f})' for v in cols.values()))


if __name__ == '__main__':
    main()

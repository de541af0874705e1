"""
Benchmark: lenslet grid estimation and raw -> 9 x 9 view decoding at Lytro size, one core.

A synthetic Lytro-like white image (3280 x 3280, 8-bit, hexagonal, pitch ~10 px, vignetting,
noise) and a raw frame (the white times a random texture) are made in the run. Printed:
grid estimation time and centre error; decode ms/frame, MB/s and frames/s for the Decoder
(8-bit remap; fixed-point maps; float32 remap), a plain numpy per-view reference in the same
run (ratio), and a memory copy of the output size (the physical limit).
Usage: python3 benchmarks/bench_decode.py
"""

import os

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS',
             'NUMEXPR_NUM_THREADS', 'VECLIB_MAXIMUM_THREADS'):
    os.environ[_var] = '1'

import sys  # noqa: E402
import time  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from timing import best_of  # noqa: E402 - benchmarks/timing.py
from lf_mpc_calib.lenslet.decode import Decoder  # noqa: E402
from lf_mpc_calib.lenslet.estimate import estimate_grid  # noqa: E402
from lf_mpc_calib.lenslet import estimate as _estimate_module  # noqa: E402
from lf_mpc_calib.lenslet.grid import numbered_grid  # noqa: E402
from lf_mpc_calib.lenslet.synthetic import white_image  # noqa: E402

cv2.setNumThreads(1)
_estimate_module.GRIDS_KEPT = 0     # each timed call fits the white afresh


def reference_decode(raw, grid, white_views_gain, i_values, j_values):
    """Plain numpy: per view, bilinear gather at the lens centres + offset, hex average, gain."""
    src = raw.astype(np.float32)
    h, w = src.shape
    cols, rows = grid.shape
    l_, k = np.mgrid[0:rows, 0:cols]
    centres = grid.centres_of(np.column_stack([k.ravel(), l_.ravel()])).reshape(rows, cols, 2)
    e_r = grid.row_vector / grid.pitch
    e_c = grid.column_vector / grid.row_spacing
    shifted = np.flatnonzero((np.arange(rows) + grid.hex_parity) % 2 == 1)
    out = np.zeros((len(j_values), len(i_values), rows, cols), np.float32)
    for jj, j in enumerate(j_values):
        for ii, i in enumerate(i_values):
            p = centres + i * e_r + j * e_c
            x, y = p[..., 0], p[..., 1]
            x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
            fx, fy = x - x0, y - y0
            val = np.zeros((rows, cols))
            for dy, dx, wt in ((0, 0, (1 - fx) * (1 - fy)), (0, 1, fx * (1 - fy)),
                               (1, 0, (1 - fx) * fy), (1, 1, fx * fy)):
                xx, yy = x0 + dx, y0 + dy
                ok = (xx >= 0) & (xx < w) & (yy >= 0) & (yy < h)
                val += np.where(ok, src[np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)], 0) * wt
            v = val.copy()
            v[shifted, 1:] = 0.5 * (val[shifted, 1:] + val[shifted, :-1])
            out[jj, ii] = v * white_views_gain[jj, ii]
    return out


def _inner(a, b):
    return np.abs(a.views - b.views)[a.valid][:, 2:-2, 2:-2]


def main():
    rng = np.random.default_rng(0)
    size = 3280
    pitch = 10.0
    # the lattice of a Lytro-like camera, numbered by the rule an estimated grid follows
    lens = [5.3 + pitch / 2, 4.9]
    truth = numbered_grid('hex', pitch, pitch * np.sqrt(3) / 2, 0.0025, lens, (size, size))
    t = time.perf_counter()
    white = white_image(truth, radius=4.3, vignetting=0.4, noise=2.0, rng=rng)
    texture = cv2.resize(rng.uniform(0.2, 1.0, (size // 16, size // 16)).astype(np.float32),
                         (size, size), interpolation=cv2.INTER_CUBIC)
    raw = np.clip(white * texture, 0, 255).astype(np.uint8)
    print(f'setup (synthetic white + raw {size} x {size}, 8-bit): '
          f'{time.perf_counter() - t:.1f} s')

    # grid estimation
    med, best, grid = best_of(lambda: estimate_grid(white, return_details=True), 3)
    g = grid.grid
    w, h = g.image_size
    tc = truth.centres()
    inside = (tc[:, 0] > 5) & (tc[:, 0] < w - 5) & (tc[:, 1] > 5) & (tc[:, 1] < h - 5)
    # one lens numbering (docs/file-formats.md): the same lens has the same index in both
    assert g.shape == truth.shape, (g.shape, truth.shape)
    err = np.hypot(*(g.centres() - tc).T)[inside]
    print(f'grid estimation: median {med * 1e3:.0f} ms (best {best * 1e3:.0f} ms), target '
          f'< 1000 ms; {g.lattice} {g.shape[0]} x {g.shape[1]} lenses, pitch {g.pitch:.4f} '
          f'(true {pitch}), centre error mean {err.mean():.4f} px, max {err.max():.4f} px')

    # decoder
    t = time.perf_counter()
    dec = Decoder(g, white=white, views=(9, 9))
    build = time.perf_counter() - t
    rows, cols = dec.view_shape
    out_bytes = 81 * rows * cols * 4
    in_mb = raw.nbytes / 1e6
    print(f'decoder build (maps + white decode, once per grid): {build * 1e3:.0f} ms; '
          f'views 9 x 9 of {cols} x {rows} px ({out_bytes / 1e6:.1f} MB float32 out)')
    dec.decode(raw)
    med, best, lf = best_of(lambda: dec.decode(raw), 15)
    print(f'decode (default: 8-bit remap in bands, fused gain + hex): {med * 1e3:.1f} ms/frame '
          f'(best {best * 1e3:.1f}), {1 / med:.1f} frames/s, {in_mb / med:.0f} MB/s raw in, '
          f'{out_bytes / 1e6 / med:.0f} MB/s views out')
    dec_fx = Decoder(g, white=white, views=(9, 9), exact=False)
    med_f, _, _ = best_of(lambda: dec_fx.decode(raw), 15)
    print(f'decode (fixed-point maps, exact=False): {med_f * 1e3:.1f} ms/frame, '
          f'{1 / med_f:.1f} frames/s')
    dec_x = Decoder(g, white=white, views=(9, 9), precise=True)
    med_x, _, lf_x = best_of(lambda: dec_x.decode(raw), 7)
    print(f'decode (float32 remap, precise=True): {med_x * 1e3:.1f} ms/frame, '
          f'{1 / med_x:.1f} frames/s; 8-bit vs float32 remap in usable views, lenses 2+ from '
          f'the border: median {np.median(_inner(lf, lf_x)):.3f}, 99.9 % '
          f'{np.percentile(_inner(lf, lf_x), 99.9):.3f} of 255')
    med_c, _, _ = best_of(lambda: dec.central_view(raw), 10)
    print(f'central view only: {med_c * 1e3:.2f} ms/frame')

    # reference: plain numpy per view, nothing precomputed but the white gain
    gain = dec._gain
    med_r, _, ref = best_of(lambda: reference_decode(raw, g, gain, dec.i_values,
                                                     dec.j_values), 2)
    diff = np.abs(ref - lf_x.views)[lf_x.valid][:, 2:-2, 2:-2]
    print(f'reference (plain numpy per view): {med_r * 1e3:.0f} ms/frame; Decoder is '
          f'{med_r / med:.1f} x faster; reference vs Decoder(precise), usable views, lenses 2+ '
          f'from the border: max difference {diff.max():.4f} of 255')

    # physical limit: copying the output once
    src = np.ones((81, rows, cols), np.float32)
    dst = np.empty_like(src)
    med_m, _, _ = best_of(lambda: np.copyto(dst, src), 20)
    med_n, _, _ = best_of(lambda: np.copyto(np.empty_like(src), src), 20)
    print(f'memcpy of the output ({out_bytes / 1e6:.1f} MB): {med_m * 1e3:.2f} ms '
          f'({out_bytes / 1e9 / med_m:.1f} GB/s), into a new array {med_n * 1e3:.2f} ms; '
          f'Decoder at {med / med_m:.1f} x the copy, {med / med_n:.1f} x the copy into new '
          f'memory (as decode allocates its output)')


if __name__ == '__main__':
    main()

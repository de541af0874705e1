"""
Benchmark: time and peak memory of the lenslet grid on flat-topped, peaked and saturated whites
and on the real whites, against the code of commit 8999422 (before the half-level centres and
the plateau candidates), each case in its own process (peak RSS from getrusage).

Renders (written here, not the project's simulator): square or hexagonal lattices at pitches
10-50 px, micro-images of fill factor 0.95 with a soft (Gaussian, 0.8 px) edge, flat-topped
(profile 1), peaked (cos^2 of the radius) or saturated (exposed 1.6 x, clipped by the converter:
flat tops of tied values), cos^4 vignetting, shot and read noise, 12 or 8 bit. Sizes: 0.3 Mpx,
1.2 Mpx (1280 x 960, the lab camera), and with
``--big`` 41 Mpx (7728 x 5368, Illum size). The baseline runs only where it fits
``--baseline-limit-gb`` of address space (default 6): it is refused beyond (the case's
``baseline`` column then says so). Columns: seconds, peak RSS (MB), centre error against the
render's truth (median / p95 px), the ratio new / baseline. Usage:

    python3 benchmarks/bench_grid_real.py [--big] [--baseline-limit-gb 6]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BASELINE_COMMIT = '8999422'
REAL = REPO.parent / 'shared' / 'data' / 'real-whites'


def render(width, height, pitch, lattice, profile, seed=0, bits=12):
    """(white (H, W): uint16 at 12 bit, uint8 at 8, true centres (N, 2)) of a square or
    hexagonal lattice; 'saturated' is exposed 1.6 x and clipped by the converter."""
    rng = np.random.default_rng(seed)
    row = pitch * (np.sqrt(3) / 2 if lattice == 'hex' else 1.0)
    origin = rng.uniform(0, 1, 2) * pitch
    rot = np.radians(0.4)
    out = np.empty((height, width), np.uint16 if bits > 8 else np.uint8)
    r_disk = 0.5 * 0.95 * pitch
    ct, st = np.cos(rot), np.sin(rot)
    xs = np.arange(width, dtype=np.float32)
    for y0 in range(0, height, 256):                     # bands: memory stays O(band)
        yy, xx = np.mgrid[y0:min(height, y0 + 256), 0:width].astype(np.float32)
        u = (xx - origin[0]) * ct + (yy - origin[1]) * st
        v = -(xx - origin[0]) * st + (yy - origin[1]) * ct
        lr = np.rint(v / row)
        shift = 0.5 * (lr % 2) if lattice == 'hex' else 0.0
        lk = np.rint(u / pitch - shift)
        du, dv = u - (lk + shift) * pitch, v - lr * row
        r = np.hypot(du, dv)
        edge = 0.5 * (1 - np.tanh((r - r_disk) / 0.8))
        if profile == 'peaked':
            inside = np.cos(np.clip(r / (2 * r_disk), 0, 0.5) * np.pi) ** 2
        else:
            inside = 1.0
        rr = np.hypot(xx - width / 2, yy - height / 2) / max(width, height)
        img = edge * inside * np.cos(np.arctan(rr * 0.8)) ** 4
        if profile == 'saturated':
            img = 1.6 * img
        electrons = rng.poisson(img * 8000.0) + rng.normal(0, 5, img.shape)
        top = 2 ** bits - 1
        out[y0:y0 + len(img)] = np.clip(electrons / 8000.0 * 0.93 * top + 0.05 * top, 0, top)
    del xs
    kk, ll = np.meshgrid(np.arange(-2, width / pitch + 3), np.arange(-2, height / row + 3))
    kx = (kk + (0.5 * (ll % 2) if lattice == 'hex' else 0.0)) * pitch
    ly = ll * row
    cx = origin[0] + kx * ct - ly * st
    cy = origin[1] + kx * st + ly * ct
    truth = np.column_stack([cx.ravel(), cy.ravel()])
    return out, truth


CHILD = r'''
import sys, json, time, resource, importlib.util, numpy as np, cv2
from scipy.spatial import cKDTree
which, path, truth_path = sys.argv[1:4]
if which == 'baseline':
    spec = importlib.util.spec_from_file_location('old_estimate', sys.argv[4])
    mod = importlib.util.module_from_spec(spec); sys.modules['old_estimate'] = mod
    spec.loader.exec_module(mod)
else:
    import lf_mpc_calib.lenslet.estimate as mod
img = np.load(path) if path.endswith('.npy') else cv2.imread(path, cv2.IMREAD_UNCHANGED)
t = time.perf_counter()
try:
    est = mod.estimate_grid_with_quality(img)
    err = None
except Exception as exc:
    est, err = None, f'{type(exc).__name__}: {str(exc)[:120]}'
dt = time.perf_counter() - t
res = {'seconds': dt, 'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
       'error': err}
if est is not None and truth_path != '-':
    truth = np.load(truth_path)
    d, _ = cKDTree(est.grid.centres()).query(est.centres)
    w, h = est.grid.image_size
    t_in = truth[(truth[:, 0] > 5) & (truth[:, 0] < w - 6) & (truth[:, 1] > 5)
                 & (truth[:, 1] < h - 6)]
    dt_, _ = cKDTree(est.grid.centres()).query(t_in)
    res.update(median=float(np.median(dt_)), p95=float(np.percentile(dt_, 95)))
if est is not None:
    res['estimator'] = getattr(est.quality, 'estimator', 'map')
print(json.dumps(res))
'''


def run_case(which, path, truth_path, baseline_file, limit_gb):
    def limit():
        if which == 'baseline':
            lim = int(limit_gb * 2 ** 30)
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    env = dict(os.environ, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1', PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, '-c', CHILD, which, path, truth_path, baseline_file],
                       capture_output=True, text=True, preexec_fn=limit, env=env)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {'error': 'died: ' + (p.stderr.strip().splitlines() or ['?'])[-1][:100]}


def fmt(r):
    if 'seconds' not in r:
        return f'{r["error"]:<40}'
    acc = f'{r["median"]:.3f}/{r["p95"]:.3f}' if 'median' in r else '-'
    e = '' if r.get('error') is None else ' ' + r['error'][:30]
    return f'{r["seconds"]:7.2f} s {r["rss_mb"]:7.0f} MB {acc:>13} {r.get("estimator", ""):>10}{e}'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--big', action='store_true', help='add the 41 Mpx flat-topped white')
    ap.add_argument('--baseline-limit-gb', type=float, default=6.0)
    args = ap.parse_args(argv)
    cases = [(640, 480, p, lat, prof, 12) for p in (10, 25, 50) for lat in ('rect', 'hex')
             for prof in ('flat', 'peaked', 'saturated')]
    cases += [(1280, 960, 48.2, 'rect', 'flat', 12), (1280, 960, 48.2, 'rect', 'saturated', 8)]
    if args.big:
        cases += [(7728, 5368, 14.0, 'hex', 'flat', 12), (7728, 5368, 14.0, 'hex', 'saturated', 8)]
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / 'old_estimate.py'
        old.write_text(subprocess.run(
            ['git', '-C', str(REPO), 'show', f'{BASELINE_COMMIT}:lf_mpc_calib/lenslet/estimate.py'],
            capture_output=True, text=True, check=True).stdout)
        print(f'{"case":<34} {"new: time, peak RSS, median/p95 px, estimator":<58} baseline')
        for w, h, pitch, lat, prof, bits in cases:
            img, truth = render(w, h, pitch, lat, prof, bits=bits)
            ip, tp = Path(tmp) / 'w.npy', Path(tmp) / 't.npy'
            np.save(ip, img)
            np.save(tp, truth)
            del img
            new = run_case('new', str(ip), str(tp), str(old), 0)
            base = run_case('baseline', str(ip), str(tp), str(old), args.baseline_limit_gb)
            ratio = (f' time x{new["seconds"] / base["seconds"]:.2f}, RSS x'
                     f'{new["rss_mb"] / base["rss_mb"]:.2f}'
                     if 'seconds' in new and 'seconds' in base else '')
            print(f'{w}x{h} {pitch:>5} {lat:<4} {prof:<9} {bits:>2}b  {fmt(new)} | {fmt(base)}'
                  f'{ratio}', flush=True)
        for name, f in (('guv', 'guv/Radiometry_GUVExperim1.tif'),
                        ('seaurchin', 'seaurchin/radiometry_frame.tif')):
            if (REAL / f).is_file():
                new = run_case('new', str(REAL / f), '-', str(old), 0)
                base = run_case('baseline', str(REAL / f), '-', str(old), args.baseline_limit_gb)
                print(f'real {name:<29}  {fmt(new)} | {fmt(base)}', flush=True)


if __name__ == '__main__':
    main()

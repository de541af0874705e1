"""
``lf-mpc-calib bench paper``: the paper's simulated experiments (Table 4, Fig. 9-11).

    lf-mpc-calib bench paper [--trials N] [--sweep poses-views|noise|all] [-o DIR]
        [--distortion] [--workers N]

Prints our numbers next to the paper's, writes ``bench_paper.json`` and PNG plots into DIR.
"""

import os
from pathlib import Path
import sys
import time

from lf_mpc_calib.cli.numbers import counts, integer, real, reals, SEED


def register(subparsers):
    """Add the ``bench`` subcommand."""
    p = subparsers.add_parser('bench', help="reproduce the paper's simulated experiments",
                              description="Reproduce the paper's simulated experiments "
                                          '(Sec. 5.1) and compare with its figures.')
    p.add_argument('experiment', choices=('paper',), help='which benchmark')
    p.add_argument('--trials', type=integer(1, 100000), default=None,
                   help='trials per cell / noise level (default: the paper\'s 200 / 150)')
    p.add_argument('--sweep', choices=('poses-views', 'noise', 'all'), default='all')
    p.add_argument('-o', '--output', default='bench_paper', metavar='DIR',
                   help='folder for bench_paper.json and the plots (default: %(default)s)')
    p.add_argument('--distortion', action='store_true',
                   help='noise sweep also with k_1..k_4 free, and with only k_3, k_4 or only '
                        'k_1, k_2 free (variants all, shear, radial)')
    p.add_argument('--variants', default=None,
                   help='comma-separated noise-sweep variants of six,all,shear,radial '
                        '(overrides --distortion)')
    p.add_argument('--poses', type=counts(2, 50), default=(2, 3, 4, 5, 6, 7, 8),
                   help='pose counts, e.g. 2-8 or 3,5 (default: 2-8)')
    p.add_argument('--views', type=counts(2, 15), default=(2, 3, 4, 5, 6, 7),
                   help='views per side, e.g. 2-7 (default: 2-7)')
    p.add_argument('--sigmas', type=reals(0, 100), default=None,
                   help='noise levels in px, comma-separated (default 0.1..1.5 step 0.1)')
    p.add_argument('--distance', type=real(0, 100, low_open=True), default=None,
                   help='board distance in metres (default 0.08)')
    p.add_argument('--noise-distances', type=reals(0, 100, low_open=True, length=3),
                   default=None, metavar='Z1,Z2,Z3',
                   help='noise sweep: one board distance per fixed pose in metres (e.g. '
                        '0.06,0.08,0.12: depth diversity separates k_3, k_4 from k_i, k_j)')
    p.add_argument('--method', choices=('exact', 'paper'), default='exact')
    p.add_argument('--seed', type=SEED, default=0)
    p.add_argument('--workers', type=integer(1, 1024), default=max(1, (os.cpu_count() or 1)),
                   help='worker processes (default: all CPUs, %(default)s)')
    p.add_argument('--quiet', action='store_true', help='no progress lines')
    p.set_defaults(func=run)


class _Progress:
    def __init__(self, label, quiet):
        self.label, self.quiet = label, quiet
        self.start = time.perf_counter()
        self.last = 0.0

    def __call__(self, done, total):
        now = time.perf_counter()
        if self.quiet or (now - self.last < 5.0 and done != total):
            return
        self.last = now
        el = now - self.start
        eta = el / done * (total - done)
        print(f'  {self.label}: {done}/{total} calibrations, {el:.0f} s, ~{eta:.0f} s left',
              file=sys.stderr, flush=True)


def run(args):
    """Run the selected sweeps, print the tables, write JSON and plots."""
    import json

    import numpy as np

    from lf_mpc_calib.simulation import paper_experiments as paper
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.simulation.observations import PAPER_DISTANCE_M

    out = Path(args.output)
    distance = args.distance or PAPER_DISTANCE_M
    if args.variants:
        variants = tuple(v.strip() for v in args.variants.split(',') if v.strip())
    elif args.distortion:
        variants = ('six', 'all', 'shear', 'radial')
    else:
        variants = ('six',)
    bad = [v for v in variants if v not in paper.VARIANTS]
    if bad:
        raise InvalidInputError(f'--variants got {bad}; expected names from '
                                f'{",".join(paper.VARIANTS)}')
    out.mkdir(parents=True, exist_ok=True)      # once the arguments are known good
    report = {'software': 'lf_mpc_calib bench paper', 'workers': args.workers}
    paths = []
    pv = noise = None
    if args.sweep in ('poses-views', 'all'):
        trials = args.trials or 200
        print(f'poses x views sweep: {trials} trials per cell, {args.workers} workers')
        pv = paper.poses_views_sweep(trials=trials, poses=args.poses,
                                     views=args.views, seed=args.seed,
                                     distance=distance, method=args.method,
                                     workers=args.workers,
                                     progress=_Progress('poses x views', args.quiet))
        print(paper.format_table4(pv))
        report['poses_views'] = pv
        paths.append(paper.plot_poses_views(pv, out / 'fig9_mean_relative_error.png'))
        paths.append(paper.plot_poses_views(pv, out / 'fig10_std_relative_error.png',
                                            key='std_percent',
                                            ylabel='std of relative error (%)'))
    if args.sweep in ('noise', 'all'):
        trials = args.trials or 150
        print(f'noise sweep: {trials} trials per level, variants {",".join(variants)}')
        noise_distance = args.noise_distances or distance
        noise = paper.noise_sweep(trials=trials, sigmas=args.sigmas or paper.DEFAULT_SIGMAS,
                                  variants=variants,
                                  seed=args.seed, distance=noise_distance, method=args.method,
                                  workers=args.workers, progress=_Progress('noise', args.quiet))
        print(paper.format_noise(noise))
        report['noise'] = noise
        paths.append(paper.plot_noise(noise, out / 'fig11_noise.png'))
    report['verdicts'] = paper.verdicts(pv, noise)
    for name, v in report['verdicts'].items():
        print(f'{name:<26} ours {v["ours"]:.4f} %  limit {v["limit"]:.4f} %  '
              f'{"PASS" if v["pass"] else "FAIL"}')
    path = out / 'bench_paper.json'
    path.write_text(json.dumps(report, indent=1, default=_json_default))
    paths.append(path)
    print('wrote ' + ', '.join(str(p) for p in paths))
    del np
    return 0


def _json_default(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)

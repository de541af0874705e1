"""
The paper's simulated experiments (Sec. 5.1; protocol in NOTES §5).

- Poses x views sweep (Table 4, Fig. 9-10): 2..8 random poses (angles uniform in +-30° about
  x, y, z), 2x2..7x7 views, sigma = 0.5 px, ``trials`` independent trials per cell (paper: 200).
  Per cell: mean and standard deviation over trials of the relative error of each of the six
  intrinsics. Table 4 = min and max of the per-cell means over the cells with >= 3 poses.
- Noise sweep (Fig. 11): the three fixed poses, 7x7 views, sigma = 0.1..1.5 px, ``trials``
  trials per level (paper: 150). Mean relative error per parameter and level.
  Besides the paper's six-intrinsic fit, ``variants`` calibrate the same data with the
  distortion terms free ('all'), only k_3, k_4 free ('shear'), or only k_1, k_2 free ('radial'),
  recording the reported standard deviations next to the observed spread ('radial' holds
  k_3, k_4 at 0). With k_3, k_4 free, k_i and k_j trade off against them (x^u = x + k_3 s
  makes X = k_i i (1 + k_3 Z) + x Z, so at one board depth Z only k_i (1 + k_3 Z) is
  determined); ``distance`` may be three values, one per pose, to give the data depth
  diversity.

The simulated camera is Table 3 with no distortion; the board 12x12 corners of 3.51 mm at
``distance`` (default 0.08 m, NOTES §5). Every trial has its own seed derived from
(seed, sweep, cell, trial), so results do not depend on the number of worker processes.
The functions return plain dicts of numbers (JSON-ready); nothing is printed.
"""

import concurrent.futures
import dataclasses
import time
import warnings

import numpy as np

from lf_mpc_calib.errors import LFCalibError
from lf_mpc_calib.camera.model import DISTORTION_NAMES, INTRINSIC_NAMES, PARAMETER_NAMES
from lf_mpc_calib.io.atomic import write_atomically
from lf_mpc_calib.simulation.observations import (
    board_points, noise_sweep_poses, paper_camera, PAPER_DISTANCE_M, random_poses,
    simulate_observations, view_grid)

#: Table 4 of the paper: min / max over cells with >= 3 poses of the mean relative error (%).
PAPER_TABLE4 = {
    'min': dict(zip(INTRINSIC_NAMES, (0.0842, 0.0795, 0.1019, 0.1020, 0.1633, 0.1295))),
    'max': dict(zip(INTRINSIC_NAMES, (2.0376, 1.9238, 0.6871, 0.6881, 1.0511, 0.9298))),
}
#: Sec. 5.1.2: at sigma = 0.5 px the mean relative errors are below these (%).
PAPER_NOISE_AT_05 = {'k_i': 0.13, 'k_j': 0.13, 'k_u': 0.13, 'k_v': 0.13,
                     'u_0': 0.24, 'v_0': 0.24}

#: Calibration variants of the noise sweep. 'zero': terms set to 0 in the closed form's model
#: before the refinement holds them fixed (calibrate's ``fix`` alone would hold k_3, k_4 at the
#: closed form's noisy shear estimate, not at 0).
VARIANTS = {
    'six': {'distortion': False, 'fix': (), 'zero': ()},
    'all': {'distortion': True, 'fix': (), 'zero': ()},
    'shear': {'distortion': True, 'fix': ('k_1', 'k_2'), 'zero': ('k_1', 'k_2')},
    'radial': {'distortion': True, 'fix': ('k_3', 'k_4'), 'zero': ('k_3', 'k_4')},
}

DEFAULT_POSES = tuple(range(2, 9))
DEFAULT_VIEWS = tuple(range(2, 8))
DEFAULT_SIGMAS = tuple(np.round(np.arange(1, 16) * 0.1, 10))


def relative_errors_percent(model, truth):
    """Return (6,) |est - truth| / |truth| * 100 of the six intrinsics."""
    est = np.array([getattr(model, n) for n in INTRINSIC_NAMES])
    ref = np.array([getattr(truth, n) for n in INTRINSIC_NAMES])
    return np.abs(est - ref) / np.abs(ref) * 100.0


def _calibrate(obs, variant, method):
    from lf_mpc_calib.calibration import calibrate, closed_form, refine
    options = VARIANTS[variant]
    if options['zero']:
        init = closed_form(obs, method=method)
        init = dataclasses.replace(
            init, model=init.model.replace(**{n: 0.0 for n in options['zero']}))
        return refine(obs, init, fix=options['fix'], method=method)
    return calibrate(obs, method=method, distortion=options['distortion'], fix=options['fix'])


def _trial(task):
    """
    One calibration trial (runs in a worker process).

    task: dict(kind, n_poses, n_views, sigma, seed (tuple), variants, method, distance).
    Returns dict with per-variant 'params' (10,), 'stddev' (10,), 'ok', 'converged',
    'iterations', 'rms', 'seconds', and the closed form's 'initial' (10,).
    """
    rng = np.random.default_rng(list(task['seed']))
    truth = paper_camera()
    board = board_points()
    if task['kind'] == 'noise':
        rv, tr = noise_sweep_poses(board, distance=task['distance'])
    else:
        rv, tr = random_poses(task['n_poses'], rng=rng, board=board, distance=task['distance'])
    obs = simulate_observations(truth, rv, tr, board, view_grid(task['n_views']),
                                noise_px=task['sigma'], rng=rng)
    out = {}
    for variant in task['variants']:
        rec = {'ok': False, 'converged': False, 'iterations': 0, 'rms': float('nan'),
               'params': [float('nan')] * 10, 'stddev': [float('nan')] * 10,
               'initial': [float('nan')] * 10, 'message': ''}
        t0 = time.perf_counter()
        try:
            result = _calibrate(obs, variant, task['method'])
        except (LFCalibError, np.linalg.LinAlgError) as exc:
            rec['message'] = f'{type(exc).__name__}: {exc}'
        else:
            rec.update(ok=True, converged=bool(result.converged),
                       iterations=int(result.iterations),
                       rms=float(result.rms_reprojection_px),
                       params=[float(x) for x in result.model.to_vector()],
                       stddev=[float(result.stddev.get(n, 0.0)) for n in PARAMETER_NAMES],
                       initial=_initial_vector(result),
                       message=str(result.message))
        rec['seconds'] = time.perf_counter() - t0
        out[variant] = rec
    return out


def _initial_vector(result):
    init = getattr(result, 'initial', None)
    init = getattr(init, 'model', init)  # an MPCModel, or an InitialSolution holding one
    if init is None:
        return [float('nan')] * 10
    return [float(x) for x in init.to_vector()]


def _run_tasks(tasks, workers, progress):
    results = [None] * len(tasks)
    if workers <= 1:
        for n, task in enumerate(tasks):
            results[n] = _trial(task)
            if progress is not None:
                progress(n + 1, len(tasks))
        return results
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_trial, task): n for n, task in enumerate(tasks)}
        for done, fut in enumerate(concurrent.futures.as_completed(futures), start=1):
            results[futures[fut]] = fut.result()
            if progress is not None:
                progress(done, len(tasks))
    return results


def _rel(params, truth_vec):
    p = np.asarray(params, dtype=float)[..., :6]
    return np.abs(p - truth_vec[:6]) / np.abs(truth_vec[:6]) * 100.0


def poses_views_sweep(*, trials=200, poses=DEFAULT_POSES, views=DEFAULT_VIEWS, noise_px=0.5,
                      seed=0, distance=PAPER_DISTANCE_M, method='exact', workers=1,
                      progress=None):
    """
    Run the poses x views sweep; return a JSON-ready dict.

    Keys: poses, views, trials, noise_px, mean_percent / std_percent / max_percent
    {param: [[cell for views] for poses]}, failures [[int]], not_converged [[int]],
    initial_mean_percent (closed form), table4 {min, max: {param: %}} over poses >= 3,
    seconds_per_calibration.
    """
    tasks = []
    for p in poses:
        for v in views:
            for t in range(trials):
                tasks.append({'kind': 'pv', 'n_poses': int(p), 'n_views': int(v),
                              'sigma': float(noise_px), 'seed': (seed, 1, int(p), int(v), t),
                              'variants': ('six',), 'method': method, 'distance': distance})
    start = time.perf_counter()
    raw = _run_tasks(tasks, workers, progress)
    wall = time.perf_counter() - start
    truth = paper_camera().to_vector()
    shape = (len(poses), len(views), trials)
    rel = np.full(shape + (6,), np.nan)
    rel0 = np.full(shape + (6,), np.nan)
    ok = np.zeros(shape, dtype=bool)
    conv = np.zeros(shape, dtype=bool)
    secs = []
    failure_examples = []
    for task, r in zip(tasks, raw):
        a, b, t = poses.index(task['n_poses']), views.index(task['n_views']), task['seed'][-1]
        rec = r['six']
        if not rec['ok'] and len(failure_examples) < 20:
            failure_examples.append({'poses': task['n_poses'], 'views': task['n_views'],
                                     'trial': t, 'message': rec['message']})
        ok[a, b, t] = rec['ok']
        conv[a, b, t] = rec['converged']
        secs.append(rec['seconds'])
        if rec['ok']:
            rel[a, b, t] = _rel(rec['params'], truth)
            rel0[a, b, t] = _rel(rec['initial'], truth)
    with np.errstate(invalid='ignore'), warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # cells where every trial failed
        mean = np.nanmean(rel, axis=2)
        std = np.nanstd(rel, axis=2)
        mx = np.nanmax(rel, axis=2)
        mean0 = np.nanmean(rel0, axis=2)
    sel = np.array([p >= 3 for p in poses])
    table4 = {'min': {}, 'max': {}}
    for k, name in enumerate(INTRINSIC_NAMES):
        cells = mean[sel, :, k]
        table4['min'][name] = float(np.nanmin(cells)) if cells.size else float('nan')
        table4['max'][name] = float(np.nanmax(cells)) if cells.size else float('nan')
    worst = {}
    for k, name in enumerate(INTRINSIC_NAMES):
        cells = np.where(sel[:, None], mean[:, :, k], -np.inf)
        a, b = np.unravel_index(np.argmax(cells), cells.shape)
        worst[name] = {'poses': int(poses[a]), 'views': int(views[b])}

    def per_param(arr):
        return {n: arr[:, :, k].tolist() for k, n in enumerate(INTRINSIC_NAMES)}
    return {
        'poses': [int(p) for p in poses], 'views': [int(v) for v in views],
        'trials': int(trials), 'noise_px': float(noise_px), 'distance_m': float(distance),
        'method': method, 'seed': int(seed),
        'mean_percent': per_param(mean), 'std_percent': per_param(std),
        'max_percent': per_param(mx), 'initial_mean_percent': per_param(mean0),
        'failures': (~ok).sum(axis=2).tolist(), 'not_converged': (ok & ~conv).sum(2).tolist(),
        'failure_examples': failure_examples,
        'table4': table4, 'table4_worst_cell': worst, 'paper_table4': PAPER_TABLE4,
        'seconds_per_calibration': float(np.mean(secs)) if secs else float('nan'),
        'wall_seconds': wall,
    }


def noise_sweep(*, trials=150, sigmas=DEFAULT_SIGMAS, variants=('six',), n_views=7, seed=0,
                distance=PAPER_DISTANCE_M, method='exact', workers=1, progress=None):
    """
    Run the noise sweep; return a JSON-ready dict.

    For each variant: mean_percent {param: [per sigma]} of the six intrinsics, spread_percent
    (std over trials of the estimate, relative), reported_stddev_percent (mean of
    result.stddev, relative), and for k_1..k_4 (truth 0) mean_abs, spread and reported_stddev
    in their own units; failures and not_converged per sigma.
    """
    sigmas = [float(s) for s in sigmas]
    tasks = []
    for a, s in enumerate(sigmas):
        for t in range(trials):
            tasks.append({'kind': 'noise', 'n_poses': 3, 'n_views': int(n_views), 'sigma': s,
                          'seed': (seed, 2, a, t), 'variants': tuple(variants),
                          'method': method, 'distance': distance})
    start = time.perf_counter()
    raw = _run_tasks(tasks, workers, progress)
    wall = time.perf_counter() - start
    truth = paper_camera().to_vector()
    out = {'sigmas': sigmas, 'trials': int(trials), 'n_views': int(n_views),
           'distance_m': np.asarray(distance, dtype=float).tolist(), 'method': method,
           'seed': int(seed),
           'paper_at_0.5': PAPER_NOISE_AT_05, 'variants': {}, 'wall_seconds': wall}
    for variant in variants:
        params = np.full((len(sigmas), trials, 10), np.nan)
        sd = np.full((len(sigmas), trials, 10), np.nan)
        ok = np.zeros((len(sigmas), trials), dtype=bool)
        conv = np.zeros((len(sigmas), trials), dtype=bool)
        secs = []
        for task, r in zip(tasks, raw):
            a, t = task['seed'][2], task['seed'][3]
            rec = r[variant]
            ok[a, t], conv[a, t] = rec['ok'], rec['converged']
            secs.append(rec['seconds'])
            if rec['ok']:
                params[a, t] = rec['params']
                sd[a, t] = rec['stddev']
        with np.errstate(invalid='ignore'), warnings.catch_warnings():
            warnings.simplefilter('ignore', RuntimeWarning)  # all-NaN columns: fixed terms
            rel = np.abs(params[..., :6] - truth[:6]) / np.abs(truth[:6]) * 100
            mean = np.nanmean(rel, axis=1)
            spread = np.nanstd(params, axis=1)
            rep = np.nanmean(sd, axis=1)
            dist_abs = np.nanmean(np.abs(params[..., 6:] - truth[6:]), axis=1)
        scale = np.abs(truth[:6]) / 100
        rec = {
            'mean_percent': {n: mean[:, k].tolist() for k, n in enumerate(INTRINSIC_NAMES)},
            'spread_percent': {n: (spread[:, k] / scale[k]).tolist()
                               for k, n in enumerate(INTRINSIC_NAMES)},
            'reported_stddev_percent': {n: (rep[:, k] / scale[k]).tolist()
                                        for k, n in enumerate(INTRINSIC_NAMES)},
            'distortion_mean_abs': {n: dist_abs[:, k].tolist()
                                    for k, n in enumerate(DISTORTION_NAMES)},
            'distortion_spread': {n: spread[:, 6 + k].tolist()
                                  for k, n in enumerate(DISTORTION_NAMES)},
            'distortion_reported_stddev': {n: rep[:, 6 + k].tolist()
                                           for k, n in enumerate(DISTORTION_NAMES)},
            'failures': (~ok).sum(axis=1).tolist(),
            'not_converged': (ok & ~conv).sum(axis=1).tolist(),
            'seconds_per_calibration': float(np.mean(secs)) if secs else float('nan'),
            'options': {'distortion': VARIANTS[variant]['distortion'],
                        'fix': list(VARIANTS[variant]['fix'])},
        }
        out['variants'][variant] = rec
    return out


def at_sigma(noise, sigma=0.5, variant='six'):
    """Return {param: mean relative error %} of a noise sweep at ``sigma`` (nearest level)."""
    a = int(np.argmin(np.abs(np.asarray(noise['sigmas']) - sigma)))
    rec = noise['variants'][variant]
    return {n: rec['mean_percent'][n][a] for n in INTRINSIC_NAMES}


def verdicts(poses_views=None, noise=None):
    """Return {target: {'ours': .., 'limit': .., 'pass': bool}} for the issue's targets."""
    out = {}
    if noise is not None and 'six' in noise['variants']:
        ours = at_sigma(noise, 0.5, 'six')
        k = max(ours[n] for n in ('k_i', 'k_j', 'k_u', 'k_v'))
        uv = max(ours['u_0'], ours['v_0'])
        out['noise_0.5_k_max_mean'] = {'ours': k, 'limit': 0.13, 'pass': bool(k <= 0.13)}
        out['noise_0.5_uv_max_mean'] = {'ours': uv, 'limit': 0.24, 'pass': bool(uv <= 0.24)}
    if poses_views is not None:
        for n in INTRINSIC_NAMES:
            ours = poses_views['table4']['max'][n]
            limit = PAPER_TABLE4['max'][n]
            out[f'table4_max_{n}'] = {'ours': ours, 'limit': limit, 'pass': bool(ours <= limit)}
    return out


# ---- text tables --------------------------------------------------------------------------
def format_table4(pv):
    """Return our Table 4 next to the paper's, as text."""
    lines = [f'Table 4: min / max over cells with >= 3 poses of the mean relative error (%), '
             f'{pv["trials"]} trials per cell, sigma = {pv["noise_px"]} px',
             f'{"":<12}' + ''.join(f'{n:>10}' for n in INTRINSIC_NAMES)]
    for row in ('min', 'max'):
        lines.append(f'{"ours " + row:<12}'
                     + ''.join(f'{pv["table4"][row][n]:>10.4f}' for n in INTRINSIC_NAMES))
        lines.append(f'{"paper " + row:<12}'
                     + ''.join(f'{PAPER_TABLE4[row][n]:>10.4f}' for n in INTRINSIC_NAMES))
    worst = pv['table4_worst_cell']
    lines.append('worst cell (poses, views): '
                 + ', '.join(f'{n} {w["poses"]},{w["views"]}x{w["views"]}'
                             for n, w in worst.items()))
    fails = int(np.sum(pv['failures']))
    nc = int(np.sum(pv['not_converged']))
    sel = [a for a, p in enumerate(pv['poses']) if p >= 3]
    fails3 = int(np.sum(np.asarray(pv['failures'])[sel])) if sel else 0
    lines.append(f'failed calibrations (refused as degenerate, excluded from the means): '
                 f'{fails} ({fails3} with >= 3 poses), not converged: {nc}, '
                 f'{pv["seconds_per_calibration"] * 1000:.0f} ms per calibration')
    lines.append('')
    lines.append('mean relative error (%) of k_i per cell (rows: poses, columns: views):')
    lines.append(f'{"poses":<7}' + ''.join(f'{f"{v}x{v}":>9}' for v in pv['views']))
    for a, p in enumerate(pv['poses']):
        lines.append(f'{p:<7}' + ''.join(f'{x:>9.4f}' for x in pv['mean_percent']['k_i'][a]))
    return '\n'.join(lines) + '\n'


def format_noise(noise):
    """Return the noise sweep's mean relative errors per variant, as text."""
    lines = [f'Noise sweep: 3 fixed poses, {noise["n_views"]}x{noise["n_views"]} views, '
             f'{noise["trials"]} trials per level; mean relative error (%)']
    for variant, rec in noise['variants'].items():
        lines.append(f'-- {variant}: distortion {rec["options"]["distortion"]}, '
                     f'fixed {rec["options"]["fix"] or "none"}; failures '
                     f'{sum(rec["failures"])}, not converged {sum(rec["not_converged"])}')
        lines.append(f'{"sigma":<7}' + ''.join(f'{n:>9}' for n in INTRINSIC_NAMES))
        for a, s in enumerate(noise['sigmas']):
            lines.append(f'{s:<7.2f}' + ''.join(
                f'{rec["mean_percent"][n][a]:>9.4f}' for n in INTRINSIC_NAMES))
        a = int(np.argmin(np.abs(np.asarray(noise['sigmas']) - 0.5)))
        lines.append(f'{"std(%)":<7}'
                     + ''.join(f'{rec["spread_percent"][n][a]:>9.4f}' for n in INTRINSIC_NAMES)
                     + f'   spread of the estimates at sigma = {noise["sigmas"][a]}')
        lines.append(f'{"rep.(%)":<7}' + ''.join(
            f'{rec["reported_stddev_percent"][n][a]:>9.4f}' for n in INTRINSIC_NAMES)
            + '   mean reported stddev (result.stddev)')
        if rec['options']['distortion']:
            lines.append('  distortion at that sigma (truth 0): '
                         + ', '.join(f'{n}: |err| {rec["distortion_mean_abs"][n][a]:.3g}'
                                     f' spread {rec["distortion_spread"][n][a]:.3g}'
                                     f' reported {rec["distortion_reported_stddev"][n][a]:.3g}'
                                     for n in DISTORTION_NAMES
                                     if n not in rec['options']['fix']))
    lines.append('paper at sigma = 0.5: k\'s < 0.13 %, u_0, v_0 < 0.24 %')
    return '\n'.join(lines) + '\n'


# ---- plots --------------------------------------------------------------------------------
def plot_poses_views(pv, path, *, key='mean_percent', ylabel='mean relative error (%)'):
    """Fig. 9 (key='mean_percent') or Fig. 10 (key='std_percent'): one panel per parameter."""
    import matplotlib
    matplotlib.use('Agg', force=False)
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, n in zip(axes.ravel(), INTRINSIC_NAMES):
        data = np.asarray(pv[key][n])
        for a, p in enumerate(pv['poses']):
            ax.plot(pv['views'], data[a], marker='o', ms=3, label=f'{p} poses')
        ax.set_yscale('log')
        ax.set_title(n)
        ax.set_xlabel('views per side')
        ax.set_ylabel(ylabel)
        ax.grid(True, which='both', alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f'{pv["trials"]} trials per cell, sigma = {pv["noise_px"]} px')
    fig.tight_layout()
    write_atomically(path, lambda p: fig.savefig(p, dpi=100))
    plt.close(fig)
    return path


def plot_noise(noise, path):
    """Fig. 11: mean relative error vs sigma, one panel per variant."""
    import matplotlib
    matplotlib.use('Agg', force=False)
    import matplotlib.pyplot as plt
    variants = list(noise['variants'])
    fig, axes = plt.subplots(1, len(variants), figsize=(5.5 * len(variants), 4.5), squeeze=False)
    for ax, variant in zip(axes[0], variants):
        rec = noise['variants'][variant]
        for n in INTRINSIC_NAMES:
            ax.plot(noise['sigmas'], rec['mean_percent'][n], marker='o', ms=3, label=n)
        ax.axhline(0.13, color='k', ls=':', lw=0.8)
        ax.axhline(0.24, color='k', ls='--', lw=0.8)
        ax.set_title(f'{variant} (fixed: {",".join(rec["options"]["fix"]) or "-"})')
        ax.set_xlabel('noise sigma (px)')
        ax.set_ylabel('mean relative error (%)')
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    write_atomically(path, lambda p: fig.savefig(p, dpi=100))
    plt.close(fig)
    return path

"""
Focused cameras from the defaults: ``lf-mpc-calib simulate --preset P --seed S`` then
``lf-mpc-calib calibrate-raw`` on its output, both with no other option, against the optics'
truth. Targets (issue 25 part 3): k's within 0.5 %, principal point within 0.5 px, RMS <= 0.2 px
and the calibration accepted (no --accept-uncertain) on the three focused presets, seeds 0-2.

The default capture is simulation.dataset.capture_board / capture_poses: boards spread over
simulation.dataset.capture_depth_range (1.5 x or more in depth, on the side of the plane
conjugate to the micro-lenses where they focus), tilted 30 degrees about both axes in turn, a
16 x 11 board filling 0.9 of the view at the nearest pose, 10 poses at 64 rays per pixel
(FOCUSED_CAPTURE_POSES, FOCUSED_SAMPLES); the multi-focus data set's manifest names its 3 lens
types, which calibrate-raw tells apart from the frames.
The truth is the optics' model in the calibration file's gauge (per-type ray fractions and
type-term centres for the multi-focus camera). A row takes 1-3 min on one core.

    OMP_NUM_THREADS=1 nice python3 benchmarks/bench_focused_defaults.py \
        [--presets focused-galilean] [--seeds 0 1 2] [--keep DIR]

Columns: max |dk|/k (%), principal point error (px), RMS reprojection (px), poses kept, CPU
seconds of simulate + calibrate-raw (process_time, this process), wall seconds, the principal
point's (u, v) residual and leave-one-pose-out sigmas (px), the largest error / sigma over
k_i..k_v and the principal point's u, v (residual sigma, jackknife sigma, the larger: what
calibrate-raw now quotes), accepted (what calibrate-raw answers without --accept-uncertain:
yes, or the refusal); last line: in how many cases all four targets are met and the errors
are within 3 quoted sigmas.

Measured 27 Nov (each pixel's lens points turned, simulation.render.pixel_turns;
focused sigmas the larger of residual and leave-one-pose-out; 2-core machine at load 7-37,
CPU s as below, wall 3-32 min a row; targets met in 9 of 9; all accepted, the Galilean and
multi-focus ones with a warning that 3 quoted sigmas of the principal point exceed 0.5 px):

    camera             seed  dk %  pp px  RMS    CPU s  sd res px  sd jack px  err/sd r j max  ok
    focused-galilean      1  0.06   0.37 0.111  141+102  0.26,0.30  0.43,0.41   1.1 0.8 0.8     yes
    focused-galilean      0  0.07   0.26 0.110  155+110  0.28,0.31  0.59,0.13   0.7 1.7 0.7     yes
    focused-galilean      2  0.07   0.37 0.113    94+83  0.28,0.31  0.26,0.41   1.1 0.9 0.8     yes
    focused-keplerian     0  0.04   0.04 0.111   139+92  0.09,0.13  0.10,0.13   1.7 1.4 1.4     yes
    focused-keplerian     1  0.14   0.29 0.111   106+79  0.09,0.13  0.08,0.13   2.9 2.7 2.7     yes
    focused-keplerian     2  0.09   0.13 0.110    94+77  0.09,0.12  0.06,0.10   1.8 2.1 1.6     yes
    focused-multifocus    0  0.03   0.12 0.097  182+167  0.09,0.14  0.10,0.26   1.1 1.0 1.0     yes
    focused-multifocus    1  0.09   0.15 0.102  104+141  0.10,0.14  0.12,0.24   1.7 1.3 1.3     yes
    focused-multifocus    2  0.06   0.14 0.103  106+139  0.09,0.13  0.10,0.16   1.4 1.3 1.3     yes

On the realistic defaults (2 Dec: shot/read noise, PRNU, black level, hot pixels, dust, each
lens 0.1 um and 0.5 % off), focused-multifocus seeds 0/1/2: dk 0.06 / 0.03 / 0.06 %, pp 0.18 /
0.15 / 0.22 px, RMS 0.107 / 0.112 / 0.113 px, errors within 1.4 sigma, all accepted. Before,
0.50 / 0.50 / 0.47 %, 0.55 / 0.63 / 0.50 px, RMS 0.125-0.128 (4.2-4.3 sigma): the detection
repeated once the lens types are told read the frame files as they are, black level and hot
pixels in, against the dark-subtracted white (pipeline.focused_raw._detect_again), and the
corners near the micro-images' rims came out ~0.03 px outwards.

Against the same lens points in every pixel (before): Galilean seed 1 1.05 -> 0.37 px, seed 2 0.62
-> 0.37 px, seed 0 0.22 -> 0.26 px, Keplerian seeds 0/1/2 0.11 / 0.06 / 0.14 -> 0.04 / 0.29 / 0.13
px, multi-focus seeds 0/1/2 0.24 / 0.18 / 0.21 -> 0.12 / 0.15 / 0.14 px; k within 0.14 %; RMS
0.08-0.10 -> 0.10-0.11 px (the cut's quadrature noise is now independent from pixel to pixel).
Every error within 2.7 quoted sigmas (3.5 residual sigmas before on Galilean seed 1). Galilean
seed 0 was refused while the refusal used the jackknife sigma (u 0.59 px > 0.5): the refusal
now stays on the residual one.

Why the Galilean missed before (1.05 / 0.62 px on seeds 1 / 2 with the same lens points in
every pixel): the frames' aperture cut of the defocused micro-images' ray bundles was about
0.8 of a continuous aperture's, while the detector's correction (features.aperture_bias)
models the continuous one; benchmarks/bench_aperture_cut.py compares both with a continuous
reference. The history of that analysis is in git.
"""

import argparse
import contextlib
import io
import os
import re
import tempfile
import time
from pathlib import Path

os.environ.setdefault('OMP_NUM_THREADS', '1')

import numpy as np  # noqa: E402

from lf_mpc_calib.cli import main  # noqa: E402
from lf_mpc_calib.io.calibration_file import load_calibration  # noqa: E402
from lf_mpc_calib.pipeline.offline import load_raw_dataset  # noqa: E402

CAMERAS = ('focused-keplerian', 'focused-galilean', 'focused-multifocus')


def truth_of(folder, calibration):
    """(the optics' model in the gauge of the calibration file: its ray fractions per lens
    type and its type terms' centres, the file), from the data set's camera."""
    from lf_mpc_calib.io.observation_table import read_observations
    from lf_mpc_calib.simulation.focused_raw import lens_types_of
    cam = load_raw_dataset(folder).camera
    cal = load_calibration(calibration)
    w = None
    if cam.mla.n_types > 1:
        obs = read_observations(calibration.with_name(calibration.stem + '_observations.csv'))
        w = np.bincount(lens_types_of(cam, obs.ijuv[:, :2]), minlength=cam.mla.n_types) \
            / len(obs)
    terms = (cal.lens_types or {}).get('terms', '')
    centres = 'lattice' if terms.endswith('-slope') else 'true'
    return cam.ground_truth_model(weights=w, centres=centres), cal


SD_LINE = re.compile(r'^\s+(k_[ijuv])\s+\S+\s+sd (\S+) / (\S+)')
PP_LINE = re.compile(r'principal point sd \((\S+), (\S+)\) / \((\S+), (\S+)\) px')


def sigmas_of(text):
    """{name: (residual sigma, leave-one-pose-out sigma)} for k_i..k_v and 'u', 'v' (px) of
    the principal point, from calibrate-raw's printed jackknife summary ({} when absent)."""
    out = {}
    for line in text.splitlines():
        m = SD_LINE.match(line)
        if m:
            out[m.group(1)] = (float(m.group(2)), float(m.group(3)))
        m = PP_LINE.search(line)
        if m:
            v = [float(x) for x in m.groups()]
            out['u'], out['v'] = (v[0], v[2]), (v[1], v[3])
    return out


def run_one(name, seed, root):
    """simulate + calibrate-raw with defaults; returns a dict: k (max |dk|/k %), pp (px),
    rms (px), accepted, poses, cpu (simulate, calibrate-raw) s, cover (largest error / sigma
    over k_i..k_v and the principal point's u and v: residual sigma, jackknife sigma, the
    larger of the two), pp_sd ((u, v) residual, (u, v) jackknife px)."""
    data, out = root / f'{name}-{seed}', root / f'{name}-{seed}.yaml'
    t0 = time.process_time()
    if not (data / 'manifest.yaml').exists():   # a kept data set is calibrated again
        assert main(['simulate', '--preset', name, '--seed', str(seed), '-o', str(data),
                     '--quiet']) == 0
    t1 = time.process_time()
    err, text = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(text):
        rc = main(['calibrate-raw', str(data), '-o', str(out)])
    cpu = (t1 - t0, time.process_time() - t1)
    row = dict(k=np.nan, pp=np.nan, rms=np.nan, poses=0, cpu=cpu, cover=(np.nan,) * 3,
               pp_sd=((np.nan,) * 2,) * 2)
    row['accepted'] = 'yes' if rc == 0 else err.getvalue().strip().splitlines()[-1][:160]
    if rc != 0:   # the figures of the calibration it refused
        text = io.StringIO()
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(text):
            if main(['calibrate-raw', str(data), '-o', str(out), '--accept-uncertain']) != 0:
                return row
    truth, cal = truth_of(data, out)
    m = cal.model
    dk = m.to_vector()[:4] - truth.to_vector()[:4]
    dpp = (m.u_0 / m.k_u - truth.u_0 / truth.k_u, m.v_0 / m.k_v - truth.v_0 / truth.k_v)
    sd = sigmas_of(text.getvalue())
    errors = dict(zip(('k_i', 'k_j', 'k_u', 'k_v', 'u', 'v'), np.abs([*dk, *dpp])))
    cover = [max((errors[n] / s[i] for n, s in sd.items()), default=np.nan) for i in (0, 1)]
    cover.append(max((errors[n] / max(s) for n, s in sd.items()), default=np.nan))
    row.update(k=100 * np.abs(dk / truth.to_vector()[:4]).max(), pp=np.hypot(*dpp),
               rms=float(cal.errors.get('rms_reprojection_px', np.nan)),
               poses=len(cal.rotation_vectors), cover=tuple(cover),
               pp_sd=tuple(tuple(sd.get(a, (np.nan, np.nan))[i] for a in 'uv') for i in (0, 1)))
    return row


def explain_pp(data, out):
    """The principal point error (px, (2,)) of the calibration ``out`` split by refits of its
    observation table in which the corners' detection errors (rows minus the truth's
    projections with the true poses) are kept only in part: (every error, the part each
    corner shares across its micro-images, the rest within a corner); and the residual and
    leave-one-pose-out sigmas of the principal point. Returns a line."""
    from dataclasses import replace
    from lf_mpc_calib.calibration import calibrate
    from lf_mpc_calib.calibration.pose_jackknife import pose_jackknife
    from lf_mpc_calib.camera.rotations import rotation_matrix
    from lf_mpc_calib.io.observation_table import read_observations
    from lf_mpc_calib.pipeline.focused_raw import orient_focused, with_raw_type_terms
    truth, _ = truth_of(data, out)
    gt = load_calibration(data / 'ground_truth.yaml')
    obs = read_observations(out.with_name(out.stem + '_observations.csv'))
    uv_true = np.empty((len(obs), 2))
    for p in np.unique(obs.pose):
        s = obs.pose == p
        points = obs.board[s] @ rotation_matrix(gt.rotation_vectors[p]).T + gt.translations[p]
        uv_true[s] = truth.project(points, obs.ijuv[s, :2])
    error = obs.ijuv[:, 2:] - uv_true
    _, corner, count = np.unique(obs.pose.astype(np.int64) * (obs.point.max() + 1) + obs.point,
                                 return_inverse=True, return_counts=True)
    shared = np.stack([np.bincount(corner, e) / count for e in error.T], 1)[corner]

    def fit(uv):
        o = replace(obs, ijuv=np.c_[obs.ijuv[:, :2], uv])
        return orient_focused(calibrate(o, **with_raw_type_terms(o, {'camera_type': 'focused'})))

    full = fit(obs.ijuv[:, 2:])
    err = [np.asarray(fit(uv_true + e).model.principal_point) - truth.principal_point
           for e in (error, shared, error - shared)]
    jack = pose_jackknife(obs, full).principal_point_stddev()
    return ('  pp error (u, v) px: all {:+.2f} {:+.2f}; shared per corner {:+.2f} {:+.2f}; '
            'within {:+.2f} {:+.2f}; sigma residual {:.2f} {:.2f}, leave-one-pose-out {:.2f} '
            '{:.2f}'.format(*err[0], *err[1], *err[2], *full.principal_point_stddev(), *jack))


def main_bench():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--presets', nargs='+', default=list(CAMERAS), choices=CAMERAS)
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--keep', default=None, help='folder to keep the data sets in')
    ap.add_argument('--explain', action='store_true',
                    help="split each single-type calibration's principal point error by refits "
                         "(explain_pp; a few seconds)")
    args = ap.parse_args()
    print(f'{"camera":18s} {"seed":>4s} {"max|dk|/k %":>11s} {"pp px":>6s} {"RMS px":>6s} '
          f'{"poses":>5s} {"CPU s sim+cal":>13s} {"wall s":>6s} {"pp sd res":>10s} '
          f'{"pp sd jack":>10s} {"err/sd res jack max":>19s}  accepted')
    met, covered = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        for name in args.presets:
            for seed in args.seeds:
                t0 = time.perf_counter()
                r = run_one(name, seed, root)
                ok = r['accepted']
                met.append(r['k'] <= 0.5 and r['pp'] <= 0.5 and r['rms'] <= 0.2 and ok == 'yes')
                covered.append(r['cover'][2] <= 3.0)
                cpu = r['cpu']
                print(f'{name:18s} {seed:4d} {r["k"]:11.2f} {r["pp"]:6.2f} {r["rms"]:6.3f} '
                      f'{r["poses"]:5d} {f"{cpu[0]:.0f}+{cpu[1]:.0f}":>13s} '
                      f'{time.perf_counter() - t0:6.0f} '
                      f'{"{:.2f},{:.2f}".format(*r["pp_sd"][0]):>10s} '
                      f'{"{:.2f},{:.2f}".format(*r["pp_sd"][1]):>10s} '
                      f'{"{:5.1f} {:5.1f} {:5.1f}".format(*r["cover"]):>19s}  {ok}', flush=True)
                data = root / f'{name}-{seed}'
                if args.explain and r['poses'] and \
                        load_raw_dataset(data).camera.mla.n_types == 1:
                    print(explain_pp(data, root / f'{name}-{seed}.yaml'), flush=True)
    print(f'targets (k <= 0.5 %, pp <= 0.5 px, RMS <= 0.2 px, accepted) met in {sum(met)} of '
          f'{len(met)} cases; error <= 3 sigma (the larger of residual and leave-one-pose-out, '
          f'k_i..k_v and principal point u, v) in {sum(covered)} of {len(covered)}')


if __name__ == '__main__':
    main_bench()

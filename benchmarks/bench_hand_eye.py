"""
Benchmark: hand-eye calibration on a simulated arm, joint refinement vs cv2.calibrateHandEye.

Targets (issue "On the robot arm"): 8 captures, corner noise 0.1 px (observation level) or as
rendered (raw frames): mount within 0.5 mm and 0.05 deg; board corners measured in the base
frame within 1.5x the floor of the optical-frame measurement; the joint refinement better than
calibrateHandEye alone (the baseline, same data, same process); |error| / sigma <= 3 for >= 95 %
of the mount and board components over the seeds. Both set-ups.

    OMP_NUM_THREADS=1 python3 benchmarks/bench_hand_eye.py [--seeds 10] [--captures 8]
        [--noise 0.1] [--views 7] [--preset lytro] [--raw] [--raw-scale 0.5] [--raw-seeds 1]

Observation level: the preset's exact MPC model (simulation.optics) at its scene distance, its
default board, random views (tilts up to 30 deg) the arm is driven to. --raw also renders one
arm dataset per seed, runs the whole calibrate-raw chain on it and solves both set-ups, the
intrinsics refined jointly with the mount (what the CLI and the node save and publish).

Measured (2 shared cores; both set-ups give the same figures on the same rendering):
--raw --raw-scale 1.0 --raw-seeds 6: mount 0.069 mm / 0.0145 deg mean, 0.098 mm / 0.030 deg
max (cv2 best 0.55 mm / 0.052 deg); principal point error 0.03-0.26 px (camera-only
0.15-0.40 px); 100 % of the components within 3 sigma. --raw --raw-seeds 5 (0.5 crop): 0.183 mm
/ 0.101 deg mean, 0.263 mm / 0.164 deg max (cv2 best 2.07 mm / 0.31 deg): the rotation misses
0.05 deg on the crop, where the principal point stays 0.4-1.5 px off (camera-only 0.8-5.3 px).
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')

import numpy as np  # noqa: E402

from lf_mpc_calib.calibration import calibrate  # noqa: E402
from lf_mpc_calib.calibration.hand_eye import calibrate_hand_eye, SETUPS  # noqa: E402
from lf_mpc_calib.camera import transforms  # noqa: E402
from lf_mpc_calib.camera.model import triangulate  # noqa: E402
from lf_mpc_calib.simulation.arm import arm_scene, default_arm  # noqa: E402
from lf_mpc_calib.simulation.observations import view_grid  # noqa: E402
from lf_mpc_calib.simulation.optics import default_board, preset  # noqa: E402


def corner_errors(model, obs, he, truth_arm, signs):
    """RMS (mm) of corners triangulated per capture: optical frame vs truth, base vs truth."""
    m = int(obs.point.max()) + 1
    keep = np.isin(obs.pose, he.pose_ids)
    obs = obs.select(keep)
    groups = obs.pose * m + obs.point
    uniq = np.unique(groups)
    pts = triangulate(model.rays(obs.ijuv), groups)                    # calibrated frame
    pose, point = uniq // m, uniq % m
    board = np.zeros((m, 3))
    board[obs.point] = obs.board
    k = np.searchsorted(he.pose_ids, pose)
    tw, tt = truth_arm.board_poses(he.robot_rvecs, he.robot_tvecs)      # truth, truth frame
    true_opt = np.array([transforms.apply((tw[a], tt[a]), board[b])[0] for a, b in zip(k, point)])
    floor = np.sqrt(np.mean(np.sum((pts - signs * true_opt) ** 2, axis=1)))
    cams = he.optical_in_base()
    est_base = np.array([transforms.apply((cams[0][a], cams[1][a]), p)[0]
                         for a, p in zip(k, pts)])
    if truth_arm.setup == 'eye-in-hand':
        true_base = transforms.apply(truth_arm.board, board[point])
    else:
        bw, bt = transforms.compose((he.robot_rvecs, he.robot_tvecs), truth_arm.board)
        true_base = np.array([transforms.apply((bw[a], bt[a]), board[b])[0]
                              for a, b in zip(k, point)])
    base = np.sqrt(np.mean(np.sum((est_base - true_base) ** 2, axis=1)))
    return 1e3 * floor, 1e3 * base


def signs_of(truth_model, model):
    s1 = np.sign(model.k_i * truth_model.k_i)
    s2 = np.sign(model.k_j * truth_model.k_j)
    return np.array([s1, s2, np.sign(model.k_u * truth_model.k_u) * s1])


def run_observation_level(args):
    cam = preset(args.preset)
    model = cam.ground_truth_model()
    board = default_board(cam)
    pts = board.points()
    rows = []
    for setup in SETUPS:
        acc = {'ref_r': [], 'ref_t': [], 'cf_r': [], 'cf_t': [], 'z': [], 'floor': [],
               'base': [], 't_cal': [], 't_he': [], 'methods': {}}
        for seed in range(args.seeds):
            sc = arm_scene(setup, n_captures=args.captures, noise_px=args.noise,
                           rng=np.random.default_rng(seed), model=model, board=pts,
                           views=view_grid(args.views), distance=cam.scene_distance,
                           arm=default_arm(setup))
            t0 = time.perf_counter()
            cal = calibrate(sc.obs)
            t1 = time.perf_counter()
            he = calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs, sc.robot_tvecs, setup=setup)
            t2 = time.perf_counter()
            truth = sc.arm.in_calibrated_frame(model, he.model)
            dr, dt = transforms.difference(he.mount, truth.mount)
            acc['ref_r'].append(dr[0])
            acc['ref_t'].append(1e3 * np.linalg.norm(dt))
            for name, e in he.closed_form.items():
                r_, t_ = transforms.difference(e.mount, truth.mount)
                acc['methods'].setdefault(name, []).append((r_[0], 1e3 * np.linalg.norm(t_)))
            cf = he.closed_form[he.closed_form_method]
            r_, t_ = transforms.difference(cf.mount, truth.mount)
            acc['cf_r'].append(r_[0])
            acc['cf_t'].append(1e3 * np.linalg.norm(t_))
            err = np.concatenate([he.mount[0] - truth.mount[0], he.mount[1] - truth.mount[1],
                                  he.board[0] - truth.board[0], he.board[1] - truth.board[1]])
            acc['z'].append(np.abs(err) / np.concatenate([*he.mount_stddev, *he.board_stddev]))
            floor, base = corner_errors(he.model, sc.obs, he, sc.arm, signs_of(model, he.model))
            acc['floor'].append(floor)
            acc['base'].append(base)
            acc['t_cal'].append(t1 - t0)
            acc['t_he'].append(t2 - t1)
        rows.append((setup, acc))
    print(f'\nObservation level: {args.preset} exact model, {board.cols}x{board.rows} board at '
          f'{cam.scene_distance:.2f} m, {args.views}x{args.views} views, {args.captures} '
          f'captures, noise {args.noise} px, {args.seeds} seeds (mean / max)')
    print(f'{"set-up":<12}{"refined mm":>14}{"refined deg":>15}{"cv2 best mm":>15}'
          f'{"cv2 best deg":>15}{"ratio t":>9}{"|z|<=3":>8}{"floor mm":>10}{"base mm":>9}'
          f'{"base/floor":>11}{"t_cal s":>8}{"t_he s":>8}')
    for setup, a in rows:
        z = np.concatenate(a['z'])
        print(f'{setup:<12}{np.mean(a["ref_t"]):7.3f}/{np.max(a["ref_t"]):6.3f}'
              f'{np.mean(a["ref_r"]):8.4f}/{np.max(a["ref_r"]):6.4f}'
              f'{np.mean(a["cf_t"]):8.3f}/{np.max(a["cf_t"]):6.3f}'
              f'{np.mean(a["cf_r"]):8.4f}/{np.max(a["cf_r"]):6.4f}'
              f'{np.mean(a["cf_t"]) / np.mean(a["ref_t"]):9.2f}{np.mean(z <= 3):8.1%}'
              f'{np.mean(a["floor"]):10.3f}{np.mean(a["base"]):9.3f}'
              f'{np.mean(np.array(a["base"]) / np.array(a["floor"])):11.3f}'
              f'{np.mean(a["t_cal"]):8.2f}{np.mean(a["t_he"]):8.2f}')
    print('cv2.calibrateHandEye per method (mean mount error mm / deg):')
    for setup, a in rows:
        print(f'  {setup:<12}' + '  '.join(
            f'{n} {np.mean([v[1] for v in vals]):.3f}/{np.mean([v[0] for v in vals]):.4f}'
            for n, vals in a['methods'].items()))


def _principal_point(model):
    return np.array([-model.u_0 / model.k_u, -model.v_0 / model.k_v])


def run_raw(args):
    from lf_mpc_calib.calibration.hand_eye_joint import intrinsics_shift, joint_calibration
    from lf_mpc_calib.io.robot_poses import read_robot_poses, RobotPoses
    from lf_mpc_calib.pipeline.hand_eye import hand_eye_for_frames
    from lf_mpc_calib.pipeline.offline import calibrate_raw, load_raw_dataset
    from lf_mpc_calib.simulation.arm import write_arm_dataset
    from lf_mpc_calib.simulation.dataset import random_poses
    cam = preset(args.preset, scale=args.raw_scale)
    board = default_board(cam)
    print(f'\nRaw frames: {args.preset} scale {args.raw_scale}, {board.cols}x{board.rows} board, '
          f'{args.captures} captures rendered with {args.samples} samples per pixel, '
          f'{args.raw_seeds} seed(s) (one rendering and camera-only calibration per seed, both '
          'set-ups solved on it); intrinsics refined jointly with the mount, errors against '
          'the truth in the joint calibration\'s frame (the one saved and published)')
    print(f'{"set-up":<12}{"seed":>5}{"refined mm":>11}{"refined deg":>12}{"cv2 best mm":>12}'
          f'{"cv2 best deg":>13}{"sd_t mm (max)":>14}{"sd_r deg":>9}{"RMS px":>8}{"cal RMS":>8}'
          f'{"pp err px cam/joint":>20}{"pp |z|":>7}{"shift sig":>10}{"t_raw s":>8}'
          f'{"t_he s":>7}{"floor mm":>9}{"base mm":>8}')
    acc = {s: {'t': [], 'r': [], 'cf_t': [], 'cf_r': [], 'z': [], 'zpp': []} for s in SETUPS}
    for seed in range(args.raw_seeds):
        with tempfile.TemporaryDirectory() as tmp:
            rv, tv = random_poses(cam, board, args.captures, rng=np.random.default_rng(seed))
            write_arm_dataset(tmp, cam, board, default_arm(SETUPS[0]), rv, tv,
                              samples=args.samples)
            ds = load_raw_dataset(tmp)
            t0 = time.perf_counter()
            run = calibrate_raw(ds, accept_uncertain=True)   # measured against the truth
            t_raw = time.perf_counter() - t0
            frames = read_robot_poses(os.path.join(tmp, 'manifest.yaml')).frames
        for setup in SETUPS:
            arm = default_arm(setup)
            robot = RobotPoses(frames, *arm.robot_poses(rv, tv), setup=setup)
            t1 = time.perf_counter()
            he = hand_eye_for_frames(run.observations, run.result, robot, run.pose_frames)
            t2 = time.perf_counter()
            a = acc[setup]
            joint = joint_calibration(he, run.observations, run.result)
            shift = intrinsics_shift(joint, run.result)
            truth = arm.in_calibrated_frame(run.truth, he.model)
            floor, base = corner_errors(he.model, run.observations, he, arm,
                                        signs_of(run.truth, he.model))
            dr, dt = transforms.difference(he.mount, truth.mount)
            cf = he.closed_form[he.closed_form_method]
            cr, ct = transforms.difference(cf.mount, truth.mount)
            err = np.concatenate([he.mount[0] - truth.mount[0], he.mount[1] - truth.mount[1],
                                  he.board[0] - truth.board[0], he.board[1] - truth.board[1]])
            a['z'].append(np.abs(err) / np.concatenate([*he.mount_stddev, *he.board_stddev]))
            a['t'].append(1e3 * np.linalg.norm(dt))
            a['r'].append(dr[0])
            a['cf_t'].append(1e3 * np.linalg.norm(ct))
            a['cf_r'].append(cr[0])
            pp_true = _principal_point(run.truth)
            pp_cam = np.linalg.norm(_principal_point(run.result.model) - pp_true)
            pp_err = _principal_point(he.model) - pp_true
            a['zpp'].append(np.abs(pp_err) / joint.principal_point_stddev())
            print(f'{setup:<12}{seed:5d}{a["t"][-1]:11.3f}{dr[0]:12.4f}'
                  f'{a["cf_t"][-1]:12.3f}{cr[0]:13.4f}'
                  f'{1e3 * np.max(he.mount_stddev[1]):14.3f}'
                  f'{np.degrees(np.linalg.norm(he.mount_stddev[0])):9.4f}'
                  f'{he.rms_reprojection_px:8.4f}{he.calibration_rms_px:8.4f}'
                  f'{pp_cam:12.3f}/{np.linalg.norm(pp_err):7.3f}{np.max(a["zpp"][-1]):7.2f}'
                  f'{shift.max_sigmas:10.2f}{t_raw:8.1f}{t2 - t1:7.2f}{floor:9.3f}{base:8.3f}')
    for setup in SETUPS:
        a = acc[setup]
        z = np.concatenate(a['z'])
        zpp = np.concatenate(a['zpp'])
        print(f'{setup:<12} mean{np.mean(a["t"]):11.3f}{np.mean(a["r"]):12.4f}'
              f'{np.mean(a["cf_t"]):12.3f}{np.mean(a["cf_r"]):13.4f}   max '
              f'{np.max(a["t"]):.3f} mm {np.max(a["r"]):.4f} deg; mount and board components '
              f'within 3 sigma: {np.mean(z <= 3):.0%} of {len(z)} (max |z| {np.max(z):.1f}), '
              f'principal point {np.mean(zpp <= 3):.0%} of {len(zpp)} (max |z| '
              f'{np.max(zpp):.1f})')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--seeds', type=int, default=10)
    ap.add_argument('--captures', type=int, default=8)
    ap.add_argument('--noise', type=float, default=0.1)
    ap.add_argument('--views', type=int, default=7)
    ap.add_argument('--preset', default='lytro', choices=('lytro', 'illum'))
    ap.add_argument('--raw', action='store_true', help='also the raw-frame chain')
    ap.add_argument('--raw-scale', type=float, default=0.5)
    ap.add_argument('--raw-seeds', type=int, default=1, help='rendered data sets per set-up')
    ap.add_argument('--samples', type=int, default=4)
    args = ap.parse_args()
    run_observation_level(args)
    if args.raw:
        run_raw(args)


if __name__ == '__main__':
    main()

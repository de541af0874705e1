"""
Benchmark: the calibration node's ~/detections picture at Lytro size, one core.

Renders (untimed) a Lytro-size white image (preset('lytro'), 3280 x 3280, 8-bit), ``--poses``
frames of the default board and a frame without a board, and captures all but the last frame
in a CalibrationSession. Then, in one process, CPU time (process_time, median of
``--repeat``):

1. baseline: CalibrationSession.capture of a frame (decode all views, the full corner
   detector), what the node does per ~/capture;
2. live_picture of a frame with the board and of one without (central view decoded alone,
   the quick look, the overlay with every captured pose's outline and the guidance): ms, the
   rate one core sustains (target >= 2 Hz) and the ratio to the capture baseline;
3. capture_picture (each capture's picture, drawn from its own detection);
4. the rgb8 message fill (when rclpy is importable);
5. with ``--node``: lf_calibration over DDS, the frame published at ``--rate`` Hz for
   ``--seconds`` s to ~/image_raw: ~/detections pictures received per second (default
   detections_rate 3 Hz), then ~/capture answered with the subscriber on and off (wall
   seconds, noisy on a shared machine).

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_detections.py [--poses 3]
       [--repeat 5] [--node [--rate 5] [--seconds 10]]
"""

import argparse
import os
import sys
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import cv2  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from lf_mpc_calib.pipeline.live_view import capture_picture, live_picture  # noqa: E402
from lf_mpc_calib.pipeline.session import CalibrationSession  # noqa: E402
from lf_mpc_calib.simulation.dataset import random_poses  # noqa: E402
from lf_mpc_calib.simulation.optics import default_board, preset  # noqa: E402
from lf_mpc_calib.simulation.render import quantize, render_raw, render_white  # noqa: E402

LINES = ['3 poses', 'sigma k_i 1.20 %, k_j 1.31 %', 'depths 0.21-0.33 m',
         'next: a pose nearer than 0.32 m', 'then: tilt the board 30 deg about x']


def cpu_ms(fn, repeat):
    """(median CPU ms of fn(), last result)."""
    times, out = [], None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        times.append(time.process_time() - t)
    return 1e3 * float(np.median(times)), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[1])
    ap.add_argument('--scale', type=float, default=1.0, help='sensor crop (1: Lytro size)')
    ap.add_argument('--poses', type=int, default=3, help='frames with the board')
    ap.add_argument('--repeat', type=int, default=5)
    ap.add_argument('--node', action='store_true', help='also the node over DDS')
    ap.add_argument('--rate', type=float, default=5.0, help='input frames per second (--node)')
    ap.add_argument('--seconds', type=float, default=10.0, help='node run time (--node)')
    args = ap.parse_args()
    cv2.setNumThreads(1)

    t0 = time.perf_counter()
    camera = preset('lytro', scale=args.scale)
    board = default_board(camera)
    rng = np.random.default_rng(7)
    rvecs, tvecs = random_poses(camera, board, args.poses, rng=rng)
    white = quantize(render_white(camera), 8)
    frames = [quantize(render_raw(camera, board, r, t, rng=rng), 8)
              for r, t in zip(rvecs, tvecs)]
    blank = np.full_like(white, 60)
    session = CalibrationSession(board, white=white)
    for frame in frames[:-1]:
        report = session.capture(frame)
        assert report.accepted, report.reason
    print(f'{camera.name} x{args.scale}: raw {white.shape[1]}x{white.shape[0]} px, board '
          f'{board.cols}x{board.rows}, {session.num_poses} captured poses, view '
          f'{session.view_size[0]}x{session.view_size[1]} px, OpenCV threads '
          f'{cv2.getNumThreads()} (setup {time.perf_counter() - t0:.1f} s, untimed)')

    def capture_again():
        out = session.capture(frames[-1])
        if out.accepted:                      # keep the session as it was
            for kept in (session.frames, session.detections, session.robot_poses):
                kept.pop()
        return out

    base, _ = cpu_ms(capture_again, max(2, args.repeat // 2))
    print(f'\nbaseline CalibrationSession.capture: {base:.0f} ms CPU per frame')
    live, picture = cpu_ms(lambda: live_picture(session, frames[-1], LINES), args.repeat)
    none, _ = cpu_ms(lambda: live_picture(session, blank, LINES), args.repeat)
    for name, ms in (('live_picture, board in sight', live), ('live_picture, no board', none)):
        print(f'{name:32s} {ms:7.1f} ms CPU  ({1e3 / ms:5.1f} Hz on one core, '
              f'{"meets" if 1e3 / ms >= 2.0 else "MISSES"} >= 2 Hz; {ms / base:.3f} x the '
              f'capture baseline)')
    cap, _ = cpu_ms(lambda: capture_picture(session, 0, LINES), args.repeat)
    print(f'{"capture_picture":32s} {cap:7.1f} ms CPU  ({cap / base:.3f} x the capture '
          f'baseline, once per capture)')
    try:
        from lf_mpc_calib.ros.image_conversion import array_to_image
    except ImportError:
        print('rgb8 message fill: rclpy not importable, not measured')
        return
    fill, msg = cpu_ms(lambda: array_to_image(picture, 'rgb8'), args.repeat)
    print(f'{"rgb8 message fill":32s} {fill:7.1f} ms CPU  ({msg.width}x{msg.height}, '
          f'{len(msg.data) / 1e6:.2f} MB)')
    total = live + fill
    print(f'live picture + message: {total:.1f} ms CPU per frame = {1e3 / total:.1f} Hz on one '
          f'core (node default detections_rate 3 Hz: {3 * total / 10:.0f} % of a core while '
          f'subscribed)')
    if args.node:
        bench_node(white, frames[-1], args)


def bench_node(white, frame, args):
    """Section 5 of the module docstring."""
    import tempfile
    import threading

    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_srvs.srv import Trigger

    from lf_mpc_calib.io.images import write_image
    from lf_mpc_calib.ros.calibration_node import CalibrationNode
    from lf_mpc_calib.ros.image_conversion import array_to_image

    folder = tempfile.mkdtemp(prefix='bench_detections_')
    white_path = str(write_image(os.path.join(folder, 'white.png'), white))
    rclpy.init()
    node = CalibrationNode(parameter_overrides=[
        Parameter('white_image_file', value=white_path), Parameter('output_dir', value=folder),
        Parameter('image_reliability', value='reliable')])
    user = rclpy.create_node('bench_user')
    pub = user.create_publisher(Image, 'image_raw', QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE))
    msg = array_to_image(frame, 'mono8')
    user.create_timer(1.0 / args.rate, lambda: pub.publish(msg))
    capture = user.create_client(Trigger, '/lf_calibration/capture')
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    executor.add_node(user)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()

    def timed_capture():
        t = time.perf_counter()
        future = capture.call_async(Trigger.Request())
        while not future.done():
            time.sleep(0.01)
        node.session.reset()
        return time.perf_counter() - t, future.result()

    try:
        deadline = time.monotonic() + 30.0
        while node.frames_received < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        alone = [timed_capture()[0] for _ in range(2)]
        pictures = []
        sub = user.create_subscription(Image, '/lf_calibration/detections', pictures.append,
                                       QoSProfile(depth=1))
        while not pictures and time.monotonic() < deadline + 10.0:
            time.sleep(0.05)
        start, count = time.monotonic(), len(pictures)
        time.sleep(args.seconds)
        elapsed = time.monotonic() - start
        hz = (len(pictures) - count) / elapsed
        watched = [timed_capture() for _ in range(2)]
        user.destroy_subscription(sub)
        print(f'\nlf_calibration over DDS, frames {args.rate:g} Hz: ~/detections {hz:.2f} '
              f'pictures/s over {elapsed:.1f} s ({"meets" if hz >= 2.0 else "MISSES"} >= 2 Hz; '
              f'live picture {1e3 * node.detections_topic.live_cost_s:.0f} ms CPU)')
        print(f'  ~/capture answered in {np.median(alone):.2f} s without a subscriber, '
              f'{np.median([w for w, _ in watched]):.2f} s with one (wall, median of 2; '
              f'{sum(r.success for _, r in watched)}/2 accepted)')
    finally:
        executor.shutdown(timeout_sec=5.0)
        thread.join(timeout=5.0)
        node.destroy_node()
        user.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()

"""
Benchmark: the decode node (lf_decoder) on the Lytro-size simulated camera.

Renders (untimed) a Lytro-size white image and a raw frame of the default board
(preset('lytro'), 3280 x 3280, 8-bit) and writes the optics' ground truth as the calibration
file. Then, in one process:

1. baseline: Decoder.decode alone (the precomputed map), median ms/frame;
2. the core of the node, LiveMeasurer.measure with points and rays: ms per stage (decode,
   rectify, detect, triangulate, rays) and the ratio of a whole frame to the baseline;
3. the node over DDS: a publisher sends the frame at ``--rate`` Hz for ``--seconds`` s to
   lf_decoder (MultiThreadedExecutor), with subscribers on ~/points, ~/center, ~/rays and
   ~/views; printed: frames/s processed, dropped frames, the node's latency and stage times
   (convert, ..., publish) from ~/stats, and the 3-D corner error against the ground truth.

Usage: .venv/bin/python benchmarks/bench_decode_node.py [--scale 1.0] [--rate 10]
       [--seconds 10]
"""

import argparse
import os
import sys
import tempfile
import threading
import time

import cv2
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from timing import median_ms  # noqa: E402 - benchmarks/timing.py
from lf_mpc_calib.measurement.live import LiveMeasurer, STAGES  # noqa: E402
from lf_mpc_calib.simulation.decode_scene import write_decode_scene  # noqa: E402
from lf_mpc_calib.simulation.optics import preset  # noqa: E402


def corner_error_mm(points, ids, corners):
    """Mean 3-D error (mm); symmetric boards may be labelled half-turned: the better labelling."""
    n = len(corners)
    return 1e3 * min(float(np.mean(np.linalg.norm(points - corners[k], axis=1)))
                     for k in (ids, n - 1 - ids))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[1])
    ap.add_argument('--scale', type=float, default=1.0, help='sensor crop (1: Lytro size)')
    ap.add_argument('--rate', type=float, default=10.0, help='input frames per second')
    ap.add_argument('--seconds', type=float, default=10.0, help='node run time')
    ap.add_argument('--repeat', type=int, default=5, help='core repetitions')
    args = ap.parse_args()

    t0 = time.perf_counter()
    camera = preset('lytro', scale=args.scale)
    folder = tempfile.mkdtemp(prefix='bench_decode_node_')
    scene = write_decode_scene(camera, folder, seed=7)
    board, white, raw, truth, corners = (scene[k] for k in ('board', 'white', 'raw', 'truth',
                                                            'corners'))
    cal_path = os.path.join(folder, 'truth.yaml')          # written by write_decode_scene
    white_path = os.path.join(folder, 'white.png')
    grid = truth.lenslet_grid
    print(f'{camera.name} x{args.scale}: raw {raw.shape[1]}x{raw.shape[0]} px, grid '
          f'{grid.shape[0]}x{grid.shape[1]} lenses, board {board.cols}x{board.rows}, '
          f'{os.cpu_count()} cores, OpenCV threads {cv2.getNumThreads()} '
          f'(setup {time.perf_counter() - t0:.1f} s, untimed)')

    # ---- 1 + 2: core ----
    m = LiveMeasurer(truth.model, grid, board=board, white=white)
    decoder = m.decoder(raw.dtype)
    decoder.decode(raw)
    base = median_ms(lambda: decoder.decode(raw), args.repeat)
    print(f'\nbaseline Decoder.decode: {base:.1f} ms/frame ({1e3 / base:.1f} frames/s)')
    # keep only the timings: holding every Measurement's light field (~40 MB each) would make
    # each decode fault in fresh pages, which the node (one frame at a time) does not
    m.measure(raw)
    timings = []
    for _ in range(args.repeat):
        last = m.measure(raw)
        timings.append(last.timings)
    stage = {k: 1e3 * float(np.median([t[k] for t in timings])) for k in STAGES}
    total = sum(stage.values())
    print('LiveMeasurer.measure (points + rays), median ms per stage:')
    for k in STAGES:
        print(f'  {k:12s} {stage[k]:8.1f} ms  ({1e3 / max(stage[k], 1e-6):9.1f} /s)')
    print(f'  {"total":12s} {total:8.1f} ms  ({1e3 / total:.2f} frames/s, '
          f'{total / base:.2f} x the decode baseline)')
    print(f'  {len(last.point_ids)} corners, mean 3-D error '
          f'{corner_error_mm(last.points, last.point_ids, corners):.2f} mm at '
          f'{np.linalg.norm(corners.mean(axis=0)) * 1e3:.0f} mm (exact model)')

    # ---- 3: the node over DDS ----
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import Image, PointCloud2

    from lf_mpc_calib.ros.decode_node import DecodeNode
    from lf_mpc_calib.ros.image_conversion import array_to_image
    from lf_mpc_calib.ros.messages import cloud_columns

    rclpy.init()
    node = DecodeNode(parameter_overrides=[
        Parameter('calibration_file', value=cal_path),
        Parameter('white_image_file', value=white_path),
        Parameter('board_cols', value=board.cols), Parameter('board_rows', value=board.rows),
        Parameter('square_size', value=float(board.square))])
    user = rclpy.create_node('bench_user')
    pub = user.create_publisher(Image, 'image_raw', 1)
    clouds, centers = [], []
    user.create_subscription(PointCloud2, '/lf_decoder/points', clouds.append, QoSProfile(depth=1))
    user.create_subscription(Image, '/lf_decoder/center', centers.append, QoSProfile(depth=1))
    user.create_subscription(PointCloud2, '/lf_decoder/rays', lambda _: None, QoSProfile(depth=1))
    user.create_subscription(Image, '/lf_decoder/views', lambda _: None, QoSProfile(depth=1))
    msg = array_to_image(raw, 'mono8')
    timer = user.create_timer(1.0 / args.rate, lambda: pub.publish(msg))
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    executor.add_node(user)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30.0
    while node.frames_processed < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    start_frames, start = node.frames_processed, time.monotonic()
    start_received, start_dropped = node.frames_received, node.frames_dropped
    time.sleep(args.seconds)
    frames = node.frames_processed - start_frames
    received = node.frames_received - start_received
    dropped = node.frames_dropped - start_dropped
    elapsed = time.monotonic() - start
    stats = node.last_stats
    print(f'\nlf_decoder over DDS, input {args.rate:g} Hz for {elapsed:.1f} s: {received} frames '
          f'received, {frames} processed = {frames / elapsed:.2f} frames/s, '
          f'{dropped} dropped (of {args.rate * elapsed:.0f} sent); '
          f'~/rate {stats.get("rate_hz")} Hz')
    print(f'  latency {stats.get("latency_ms")} ms per frame (last), stages ms: '
          + ', '.join(f'{k} {v}' for k, v in stats.get('stages_ms', {}).items()))
    if clouds and clouds[-1].width:
        cols = cloud_columns(clouds[-1])
        pts = np.column_stack([cols['x'], cols['y'], cols['z']]).astype(float)
        print(f'  ~/points: {len(pts)} corners, mean 3-D error '
              f'{corner_error_mm(pts, cols["id"].astype(int), corners):.2f} mm; ~/center '
              f'{centers[-1].width}x{centers[-1].height}' if centers else '')
    timer.cancel()
    user.destroy_timer(timer)
    executor.shutdown(timeout_sec=5.0)
    thread.join(timeout=5.0)
    node.destroy_node()
    user.destroy_node()
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()

"""
Benchmark: the decode node (lf_decoder) as a process on Raytrix-R12-size focused frames.

Renders (untimed) a white and a few 4080 x 3068 8-bit frames of the focused Keplerian preset's
optics on a larger sensor (a board drifting sideways and in depth), writes the ground-truth
calibration and the white. Then for each output set a user asks for, it starts
``python -m lf_mpc_calib.ros.decode_node`` as its own process (as ``ros2 run`` or a launch file
does), streams the frames in a loop at ``--rate`` Hz from this process over DDS (reliable, as
large frames across processes need), and measures what a user's subscribers receive for
``--seconds`` s:

- center: ``~/center`` only (measure_points false);
- center + points: ``~/center`` and ``~/points`` (measure_points true);
- center + depth: ``~/center`` and ``~/depth`` (measure_points false).

Printed per run: the rate each topic arrives at, the latency (arrival - the input frame's
stamp, one clock) median and 90th percentile, the frames sent / processed / dropped and the
node's own ``~/rate``, ``corners`` and ``full_search_ms`` from ``~/stats``. Baseline in the
same process: one ``~/center`` render of the same frame, timed in the core (ms), so a ratio to
it says what the node's transport and scheduling cost.

Usage: .venv/bin/python benchmarks/bench_decode_node_focused.py [--rate 15] [--seconds 15]
       [--frames 4] [--samples 8] [--size 4080x3068] [--runs center,points,depth]
"""

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from timing import median_ms  # noqa: E402 - benchmarks/timing.py

RUNS = {'center': ('~/center only', False, ()),
        'points': ('~/center + ~/points', True, ('points',)),
        'depth': ('~/center + ~/depth', False, ('depth',))}


def render(size, n, samples):
    """(folder, white, frames (n,), board) of the R12-size focused camera, written to disk."""
    import dataclasses

    from lf_mpc_calib.io.calibration_file import default_frames, save_calibration
    from lf_mpc_calib.io.images import write_image
    from lf_mpc_calib.simulation.dataset import ground_truth_file
    from lf_mpc_calib.simulation.optics import Checkerboard, preset
    from lf_mpc_calib.simulation.focused_raw import board_pose
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    cam = preset('focused-keplerian', sensor__width=size[0], sensor__height=size[1])
    board = Checkerboard(12, 9, 0.7 * cam.field_of_view(cam.scene_distance)[1] / 10)
    folder = tempfile.mkdtemp(prefix='bench_decode_node_focused_')
    white = quantize(render_white(cam, samples=samples), 8)
    poses = [board_pose(cam, board, (1.25 + 0.004 * k) * cam.scene_distance, (10.0, -8.0, 3.0),
                        offset=(0.001 * k, 0.0)) for k in range(n)]
    frames = [quantize(render_raw(cam, board, rv, tv, samples=samples, noise=0.0), 8)
              for rv, tv in poses]
    truth = dataclasses.replace(ground_truth_file(cam, [p[0] for p in poses],
                                                  [p[1] for p in poses]),
                                frames=default_frames('lf_camera'))
    save_calibration(os.path.join(folder, 'truth.yaml'), truth)
    write_image(os.path.join(folder, 'white.png'), white)
    return folder, white, frames, board


def core_center_ms(folder, white, frame):
    """Median ms of one ~/center render of ``frame`` in this process (the baseline)."""
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.measurement.focused import FocusedMeasurer
    m = FocusedMeasurer.from_calibration(load_calibration(os.path.join(folder, 'truth.yaml')),
                                         white=white)
    raw = frame.astype(np.float32)
    m.live.render(raw)                      # the first frame builds the maps
    return median_ms(lambda: m.live.render(raw), 5)


def start_node(folder, board, measure_points, domain):
    """The decode node as a process (its stderr to a log file); returns (Popen, log path)."""
    log = os.path.join(folder, f'node_{time.monotonic_ns()}.log')
    args = [sys.executable, '-m', 'lf_mpc_calib.ros.decode_node', '--ros-args',
            '-p', f'calibration_file:={folder}/truth.yaml',
            '-p', f'white_image_file:={folder}/white.png',
            '-p', f'board_cols:={board.cols}', '-p', f'board_rows:={board.rows}',
            '-p', f'square_size:={float(board.square)}',
            '-p', f'measure_points:={"true" if measure_points else "false"}',
            '-p', 'image_reliability:=reliable']
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST')
    with open(log, 'w') as f:
        proc = subprocess.Popen(args, env=env, stdout=f, stderr=subprocess.STDOUT)
    return proc, log


class User:
    """This process's side: a publisher of the frames and the subscribers a user has."""

    def __init__(self, frames, extra, rate):
        import rclpy
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image, PointCloud2
        from std_msgs.msg import String
        from lf_mpc_calib.ros.image_conversion import array_to_image
        self.node = rclpy.create_node('bench_user')
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        self.pub = self.node.create_publisher(Image, 'image_raw', reliable)
        # serialized once: rclpy takes 0.17 s to serialize a 12.5 MB Image, which would make
        # this publisher, not the node, what the run measures; the stamp is patched per frame
        from rclpy.serialization import serialize_message
        self.msgs = [bytearray(serialize_message(array_to_image(f, 'mono8'))) for f in frames]
        self.sent, self.arrivals, self.stats, self.looks = 0, {'center': []}, None, []
        self.lock = threading.Lock()
        # raw (serialized) messages: a Python subscriber deserializing 3 MB images would be
        # what limits the rate measured; the stamp is read from the CDR header
        self.node.create_subscription(Image, '/lf_decoder/center',
                                      lambda m: self._arrived('center', m), reliable, raw=True)
        topics = {'points': ('/lf_decoder/points', PointCloud2),
                  'depth': ('/lf_decoder/depth', Image)}
        for name in extra:
            topic, kind = topics[name]
            self.arrivals[name] = []
            self.node.create_subscription(kind, topic, lambda m, n=name: self._arrived(n, m),
                                          reliable, raw=True)
        self.node.create_subscription(String, '/lf_decoder/stats', self._on_stats, 10)
        self.timer = self.node.create_timer(1.0 / rate, self._publish)

    def _publish(self):
        msg = self.msgs[self.sent % len(self.msgs)]
        now = self.node.get_clock().now().nanoseconds
        struct.pack_into('<iI', msg, 4, now // 1_000_000_000, now % 1_000_000_000)
        self.pub.publish(bytes(msg))
        self.sent += 1

    def _arrived(self, name, data):
        now = self.node.get_clock().now().nanoseconds
        sec, nanosec = struct.unpack_from('<iI', data, 4)    # after the CDR encapsulation
        stamp = sec * 1_000_000_000 + nanosec
        with self.lock:
            self.arrivals[name].append((time.monotonic(), (now - stamp) * 1e-6))

    def _on_stats(self, msg):
        try:
            stats = yaml.safe_load(msg.data)
        except yaml.YAMLError:
            return
        with self.lock:
            self.stats = stats
            self.looks.append((time.monotonic(), str(stats.get('corners') or ''),
                               dict(stats.get('frames') or {})))


def measure(user, executor, seconds):
    """Per topic (rate Hz, latency median ms, latency p90 ms) over ``seconds`` s, after the
    first center arrives (the node's maps are built)."""
    deadline = time.monotonic() + 120.0
    while not user.arrivals['center'] and time.monotonic() < deadline:
        time.sleep(0.1)
    t0, sent0 = time.monotonic(), user.sent
    time.sleep(seconds)
    t1 = time.monotonic()
    out = {}
    with user.lock:
        looks = [(c, f) for t, c, f in user.looks if t0 <= t <= t1]
        for name, got in user.arrivals.items():
            window = [lat for t, lat in got if t0 <= t <= t1]
            out[name] = (len(window) / (t1 - t0),
                         float(np.median(window)) if window else float('nan'),
                         float(np.percentile(window, 90)) if window else float('nan'))
    tracked = sum(c.startswith(('tracked', 're-acquired')) for c, _ in looks)
    dropped = (looks[-1][1].get('dropped', 0) - looks[0][1].get('dropped', 0)) if looks else 0
    return out, user.sent - sent0, t1 - t0, (tracked, len(looks), dropped)


def run_one(key, folder, board, frames, args, domain):
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    label, points, extra = RUNS[key]
    proc, log = start_node(folder, board, points, domain)
    os.environ['ROS_DOMAIN_ID'] = str(domain)
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    rclpy.init()
    try:
        user = User(frames, extra, args.rate)
        executor = MultiThreadedExecutor(num_threads=2)
        executor.add_node(user.node)
        spin = threading.Thread(target=executor.spin, daemon=True)
        spin.start()
        rates, sent, elapsed, (tracked, looks, dropped) = measure(user, executor, args.seconds)
        stats = user.stats or {}
        print(f'\n{label}: {sent} frames sent in {elapsed:.1f} s ({sent / elapsed:.1f} Hz), '
              f'{looks} processed, {dropped} dropped by the node'
              + (f'; corners tracked in {tracked} of {looks} looks' if points else ''))
        for name, (rate, med, p90) in rates.items():
            print(f'  ~/{name:7s} {rate:5.1f} Hz, latency median {med:6.0f} ms, p90 {p90:6.0f} ms')
        print(f'  ~/stats (last): ~/rate {stats.get("rate_hz")} Hz, latency '
              f'{stats.get("latency_ms")} ms, corners {stats.get("corners")!r}, full_search_ms '
              f'{stats.get("full_search_ms")}, problems {stats.get("problems")}')
        executor.shutdown(timeout_sec=5.0)
        user.node.destroy_node()
    finally:
        rclpy.try_shutdown()
        proc.send_signal(2)                 # SIGINT, as ctrl-c
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    if proc.returncode not in (0, -2, 130):
        print(f'  the node exited {proc.returncode}; its log: {log}')
    return rates


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[1])
    ap.add_argument('--rate', type=float, default=15.0, help='input frames per second')
    ap.add_argument('--seconds', type=float, default=15.0, help='measured time per run')
    ap.add_argument('--frames', type=int, default=4, help='frames rendered (looped)')
    ap.add_argument('--samples', type=int, default=8, help='rays per pixel of the render')
    ap.add_argument('--size', default='4080x3068', help='sensor WxH (default: the R12\'s)')
    ap.add_argument('--runs', default='center,points,depth', help=f'of {",".join(RUNS)}')
    ap.add_argument('--domain', type=int, default=77, help='ROS_DOMAIN_ID of the runs')
    args = ap.parse_args()
    size = tuple(int(v) for v in args.size.lower().split('x'))
    t = time.perf_counter()
    folder, white, frames, board = render(size, args.frames, args.samples)
    print(f'focused-keplerian optics on {size[0]} x {size[1]} px, board {board.cols}x'
          f'{board.rows}, {args.frames} frames looped at {args.rate:g} Hz, {os.cpu_count()} '
          f'cores (render {time.perf_counter() - t:.0f} s, untimed; files in {folder})')
    base = core_center_ms(folder, white, frames[0])
    print(f'baseline: one ~/center render in this process {base:.0f} ms '
          f'({1e3 / base:.1f} frames/s)')
    for k, key in enumerate(args.runs.split(',')):
        rates = run_one(key.strip(), folder, board, frames, args, args.domain + k)
        print(f'  ~/center at {rates["center"][0]:.1f} Hz: {rates["center"][0] / args.rate:.2f} '
              f'of the input rate; the core alone renders {1e3 / base:.0f} frames/s')


if __name__ == '__main__':
    main()

"""
Benchmark: the decode node (lf_decoder) as a process on Raytrix-R12-size focused frames.

Renders (untimed) a white and a few 4080 x 3068 8-bit frames of the focused Keplerian preset's
optics on a larger sensor (a board drifting sideways and in depth), writes the ground-truth
calibration, the white and the frames. Then for each output set a user asks for, and each
transport, it starts ``python -m lf_mpc_calib.ros.decode_node`` as its own process (as ``ros2
run`` or a launch file does) and a camera process (this script with ``--camera``, as a driver
would be) that streams the frames in a loop at ``--rate`` Hz over DDS (reliable, depth 1), and
measures what a user's subscribers in this process receive for ``--seconds`` s:

- center: ``~/center`` only (measure_points false);
- center + points: ``~/center`` and ``~/points`` (measure_points true);
- center + depth: ``~/center`` and ``~/depth`` (measure_points false).

Transports (``--transports``): ``default``, Fast DDS as it comes (512 KB shared-memory
segments); ``large``, node and camera with the package's profile
(:mod:`lf_mpc_calib.ros.transport`, which the node's ``main()`` applies by itself).

Measured from the first ~/center (with points: from the first frame tracked, after the first
full search). Printed per run: the rate each topic arrives at, the latency (arrival - the
input frame's stamp, one clock) median and 90th percentile, the frames sent / received by the
node / processed / dropped, the CPU the node's threads and the camera used (cores, from
/proc), the node's own ``~/rate`` and stage times, ``corners`` and
``full_search_ms`` from ``~/stats``; then each output set's ~/center rate under ``large``
against ``default``. Baseline in this process: the core's own cost a frame on the same looped
frames (render, and render + corners), so a ratio to it says what the node's transport and
scheduling cost.

Usage: .venv/bin/python benchmarks/bench_decode_node_focused.py [--rate 15] [--seconds 15]
       [--frames 4] [--samples 8] [--size 4080x3068] [--runs center,points,depth]
       [--transports default,large] [--folder DIR (reuse its frames)]
"""

import argparse
import os
import signal
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
    np.save(os.path.join(folder, 'frames.npy'), np.stack(frames))
    np.save(os.path.join(folder, 'white.npy'), white)
    with open(os.path.join(folder, 'board.yaml'), 'w') as f:
        yaml.safe_dump({'cols': board.cols, 'rows': board.rows, 'square': float(board.square)},
                       f)
    return folder, white, frames, board


def load(folder):
    """(folder, white, frames, board) written by :func:`render`."""
    from lf_mpc_calib.simulation.optics import Checkerboard
    with open(os.path.join(folder, 'board.yaml')) as f:
        b = yaml.safe_load(f)
    frames = np.load(os.path.join(folder, 'frames.npy'))
    return (folder, np.load(os.path.join(folder, 'white.npy')), list(frames),
            Checkerboard(b['cols'], b['rows'], b['square']))


def core_ms(folder, white, frames, board):
    """Median ms a frame in this process, the looped frames in turn (the baseline): the render
    of ~/center, and render + corners (tracked after the first frames' full search)."""
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.measurement.focused import FocusedMeasurer
    cal = load_calibration(os.path.join(folder, 'truth.yaml'))
    out = []
    for b in (None, board):
        m = FocusedMeasurer.from_calibration(cal, white=white, board=b)
        for f in frames:
            m.measure(f)                    # the maps, w, the full search
        k = iter(range(10 ** 6))
        out.append(median_ms(lambda: m.measure(frames[next(k) % len(frames)]),
                             2 * len(frames)))
    return out


def camera(folder, rate):
    """--camera: publish the folder's frames in a loop at ``rate`` Hz until SIGINT; prints
    'sent N in S s'. Serialized once: rclpy takes 0.17 s to serialize a 12.5 MB Image, which
    would make this publisher, not the node, what the run measures; the stamp is patched."""
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image
    from lf_mpc_calib.ros.image_conversion import array_to_image
    rclpy.init()
    node = rclpy.create_node('bench_camera')
    pub = node.create_publisher(Image, 'image_raw',
                                QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
    msgs = [bytearray(serialize_message(array_to_image(f, 'mono8')))
            for f in np.load(os.path.join(folder, 'frames.npy'))]
    sent, stop = [0], threading.Event()

    def publish():
        msg = msgs[sent[0] % len(msgs)]
        now = node.get_clock().now().nanoseconds
        struct.pack_into('<iI', msg, 4, now // 1_000_000_000, now % 1_000_000_000)
        pub.publish(bytes(msg))
        sent[0] += 1

    signal.signal(signal.SIGINT, lambda *_: stop.set())
    node.create_timer(1.0 / rate, publish)
    t0 = time.monotonic()
    while not stop.is_set():
        rclpy.spin_once(node, timeout_sec=0.05)
    print(f'sent {sent[0]} in {time.monotonic() - t0:.2f} s', flush=True)
    node.destroy_node()
    rclpy.try_shutdown()


def transport_env(transport, domain):
    """Environment of the node and camera processes for a transport ('default' or 'large')."""
    from lf_mpc_calib.ros.transport import PROFILE
    env = {k: v for k, v in os.environ.items() if k not in (
        'FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE',
        'FASTDDS_BUILTIN_TRANSPORTS')}
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST')
    if transport == 'large':
        env['FASTDDS_DEFAULT_PROFILES_FILE'] = PROFILE
    else:       # Fast DDS's own default, named so that the node's main() leaves it alone
        env['FASTDDS_BUILTIN_TRANSPORTS'] = 'DEFAULT'
    return env


def start_node(folder, board, measure_points, env):
    """The decode node as a process (its stderr to a log file); returns (Popen, log path)."""
    log = os.path.join(folder, f'node_{time.monotonic_ns()}.log')
    args = [sys.executable, '-m', 'lf_mpc_calib.ros.decode_node', '--ros-args',
            '-p', f'calibration_file:={folder}/truth.yaml',
            '-p', f'white_image_file:={folder}/white.png',
            '-p', f'board_cols:={board.cols}', '-p', f'board_rows:={board.rows}',
            '-p', f'square_size:={float(board.square)}',
            '-p', f'measure_points:={"true" if measure_points else "false"}',
            '-p', 'image_reliability:=reliable']
    with open(log, 'w') as f:
        proc = subprocess.Popen(args, env=env, stdout=f, stderr=subprocess.STDOUT)
    return proc, log


class User:
    """This process's side: the subscribers a user has."""

    def __init__(self, extra):
        import rclpy
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image, PointCloud2
        from std_msgs.msg import String
        self.node = rclpy.create_node('bench_user')
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        self.arrivals, self.stats, self.looks = {'center': []}, None, []
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


def thread_cpu(pid):
    """{thread name: CPU seconds (user + system)} of a process's threads (Linux /proc; names
    as the kernel keeps them, 15 characters, digits dropped so a pool's threads add up)."""
    import re
    tick, out = os.sysconf('SC_CLK_TCK'), {}
    try:
        tasks = os.listdir(f'/proc/{pid}/task')
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f'/proc/{pid}/task/{tid}/stat') as f:
                text = f.read()
        except OSError:
            continue
        name = re.sub(r'[\d.#-]+$', '', text[text.index('(') + 1:text.rindex(')')]) or '?'
        fields = text[text.rindex(')') + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def cpu_share(before, after, seconds):
    """(cores used in all, {thread name: cores}) between two :func:`thread_cpu` readings."""
    per = {k: (after.get(k, 0.0) - before.get(k, 0.0)) / seconds for k in after}
    return sum(per.values()), dict(sorted(per.items(), key=lambda kv: -kv[1]))


def measure(user, seconds, points, pids):
    """Per topic (rate Hz, latency median ms, latency p90 ms) over ``seconds`` s, after the
    first center arrives (the node's maps are built) and, with ``points``, the board is
    tracked (the first full search, seconds, has ended); the node's frame counters over that
    time and the corner looks."""
    deadline = time.monotonic() + 180.0

    def ready():
        with user.lock:
            if not user.arrivals['center']:
                return False
            return not points or any(c.startswith(('tracked', 're-acquired'))
                                     for _, c, _ in user.looks)
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.1)
    t0, cpu0 = time.monotonic(), [thread_cpu(p) for p in pids]
    time.sleep(seconds)
    t1, cpu1 = time.monotonic(), [thread_cpu(p) for p in pids]
    out = {}
    with user.lock:
        looks = [(c, f) for t, c, f in user.looks if t0 <= t <= t1]
        for name, got in user.arrivals.items():
            window = [lat for t, lat in got if t0 <= t <= t1]
            out[name] = (len(window) / (t1 - t0),
                         float(np.median(window)) if window else float('nan'),
                         float(np.percentile(window, 90)) if window else float('nan'))
    tracked = sum(c.startswith(('tracked', 're-acquired')) for c, _ in looks)
    counts = {k: (looks[-1][1].get(k, 0) - looks[0][1].get(k, 0)) if looks else 0
              for k in ('received', 'processed', 'dropped')}
    cpu = [cpu_share(a, b, t1 - t0) for a, b in zip(cpu0, cpu1)]
    return out, t1 - t0, tracked, len(looks), counts, cpu


def stop(proc, timeout=10.0):
    """SIGINT (as ctrl-c), then kill after ``timeout`` s; returns the process's stdout."""
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ''


def run_one(key, transport, folder, board, args, domain):
    """One output set under one transport: prints its figures, returns the rates."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    label, points, extra = RUNS[key]
    env = transport_env(transport, domain)
    proc, log = start_node(folder, board, points, env)
    cam = subprocess.Popen([sys.executable, os.path.abspath(__file__), '--camera', folder,
                            '--rate', str(args.rate)], env=env, stdout=subprocess.PIPE,
                           text=True)
    os.environ['ROS_DOMAIN_ID'] = str(domain)
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    rclpy.init()
    try:
        user = User(extra)
        executor = MultiThreadedExecutor(num_threads=2)
        executor.add_node(user.node)
        spin = threading.Thread(target=executor.spin, daemon=True)
        spin.start()
        rates, elapsed, tracked, looks, counts, cpu = measure(user, args.seconds, points,
                                                              (proc.pid, cam.pid))
        stats = user.stats or {}
        executor.shutdown(timeout_sec=5.0)
        spin.join(timeout=5.0)      # its callbacks over before the node goes (else rclpy prints
        user.node.destroy_node()    # 'cannot use Destroyable ...' as never retrieved)
    finally:
        rclpy.try_shutdown()
        sent = stop(cam).strip()
        stop(proc)
    print(f'\n{label}, transport {transport}: camera {sent}; in {elapsed:.1f} s the node '
          f'received {counts["received"]}, processed {counts["processed"]}, dropped '
          f'{counts["dropped"]}' + (f'; corners tracked in {tracked} of {looks} looks'
                                    if points else ''))
    for name, (rate, med, p90) in rates.items():
        print(f'  ~/{name:7s} {rate:5.1f} Hz, latency median {med:6.0f} ms, p90 {p90:6.0f} ms')
    (node, threads), (camera_cores, _) = cpu
    print(f'  CPU: the node {node:.2f} cores (' + ', '.join(
        f'{k} {v:.2f}' for k, v in list(threads.items())[:5] if v >= 0.01)
        + f'), the camera {camera_cores:.2f}; load {os.getloadavg()[0]:.1f}')
    print(f'  ~/stats (last): ~/rate {stats.get("rate_hz")} Hz, latency '
          f'{stats.get("latency_ms")} ms, stages {stats.get("stages_ms")}, corners '
          f'{stats.get("corners")!r}, full_search_ms {stats.get("full_search_ms")}, problems '
          f'{stats.get("problems")}')
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
    ap.add_argument('--transports', default='default,large', help='of default,large')
    ap.add_argument('--domain', type=int, default=77, help='first ROS_DOMAIN_ID of the runs')
    ap.add_argument('--folder', help='reuse the frames a run rendered into this folder')
    ap.add_argument('--camera', metavar='FOLDER', help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.camera:
        return camera(args.camera, args.rate)
    size = tuple(int(v) for v in args.size.lower().split('x'))
    t = time.perf_counter()
    folder, white, frames, board = load(args.folder) if args.folder else \
        render(size, args.frames, args.samples)
    print(f'focused-keplerian optics on {frames[0].shape[1]} x {frames[0].shape[0]} px, board '
          f'{board.cols}x{board.rows}, {len(frames)} frames looped at {args.rate:g} Hz, '
          f'{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} (render '
          f'{time.perf_counter() - t:.0f} s, untimed; files in {folder})')
    center_ms, points_ms = core_ms(folder, white, frames, board)
    print(f'baseline, the core in this process on the looped frames: ~/center {center_ms:.0f} '
          f'ms ({1e3 / center_ms:.1f} frames/s), ~/center + ~/points {points_ms:.0f} ms '
          f'({1e3 / points_ms:.1f} frames/s)')
    domain, rates = args.domain, {}
    for key in (k.strip() for k in args.runs.split(',')):
        for transport in (t.strip() for t in args.transports.split(',')):
            rates[key, transport] = run_one(key, transport, folder, board, args, domain)
            domain += 1
            got = rates[key, transport]['center'][0]
            print(f'  ~/center at {got:.1f} Hz: {got / args.rate:.2f} of the input rate, '
                  f'{got * center_ms / 1e3:.2f} of what the core renders alone')
        if (key, 'default') in rates and (key, 'large') in rates:
            a, b = rates[key, 'default']['center'][0], rates[key, 'large']['center'][0]
            print(f'{RUNS[key][0]}: ~/center {b:.1f} Hz with the large-frame transport, '
                  f'{a:.1f} Hz without ({b / max(a, 1e-9):.1f}x)')
    print(f'load {os.getloadavg()[0]:.1f} at the end')


if __name__ == '__main__':
    main()

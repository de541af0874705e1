"""
The ROS demo of the focused presets at its defaults against the trust targets (issue 25 part 3):
``lf-mpc-calib demo --ros --preset P --seed S``, each run in its own process, its verdict
against the simulator's truth (k within 1 %, principal point within 1 px, the decode node's 3-D
corners within 1.5 x the floor) with its wall time and CPU time (all: the demo process and
its render worker, getrusage of the children; main: the demo process alone, as it prints it).
On a quiet 2-core machine the wall time is about the main CPU time plus a few seconds: the
worker renders on the other core.

    OMP_NUM_THREADS=1 nice python3 benchmarks/bench_ros_demo.py \
        [--presets focused-keplerian] [--seeds 0 1 2] [-- extra demo options]

Columns: max |dk|/k (%), principal point error (px), 3-D corners / floor, wall s, CPU s (all,
main), verdict; last line: in how many cases the demo says "a calibration to trust".
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import time

PRESETS = ('focused-keplerian', 'focused-galilean', 'focused-multifocus')
VERDICT = re.compile(r'against the truth: k within ([0-9.]+) %, principal point ([0-9.]+) px, '
                     r'3-D corners ([0-9.]+) x the floor: (.*)')
MAIN_CPU = re.compile(r'demo took [0-9.]+ s \(CPU ([0-9.]+) s in this process')


def run_one(preset, seed, extra):
    """(k %, pp px, corners / floor, wall s, (all, main) CPU s, verdict or the failure's last
    line)."""
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '1'))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, '-m', 'lf_mpc_calib.ros.demo', '--preset', preset,
                           '--seed', str(seed)] + list(extra), env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    main = MAIN_CPU.search(proc.stdout)
    cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
           float(main.group(1)) if main else float('nan'))
    m = VERDICT.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ['no output']
        return float('nan'), float('nan'), float('nan'), wall, cpu, f'failed: {last[0][:100]}'
    k, pp, ratio = (float(v) for v in m.groups()[:3])
    return k, pp, ratio, wall, cpu, m.group(4)[:60]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--presets', nargs='+', default=list(PRESETS), choices=PRESETS)
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('extra', nargs='*', help='more demo options (after --)')
    args = ap.parse_args()
    print(f'{"preset":18s} {"seed":>4s} {"k %":>6s} {"pp px":>6s} {"x floor":>7s} '
          f'{"wall s":>6s} {"CPU s all, main":>15s}  verdict', flush=True)
    trusted = 0
    cases = [(p, s) for p in args.presets for s in args.seeds]
    for preset, seed in cases:
        k, pp, ratio, wall, cpu, verdict = run_one(preset, seed, args.extra)
        trusted += verdict.startswith('a calibration to trust')
        print(f'{preset:18s} {seed:4d} {k:6.2f} {pp:6.2f} {ratio:7.2f} {wall:6.0f} '
              f'{f"{cpu[0]:.0f}, {cpu[1]:.0f}":>15s}  {verdict}', flush=True)
    print(f'a calibration to trust in {trusted} of {len(cases)} cases')


if __name__ == '__main__':
    main()

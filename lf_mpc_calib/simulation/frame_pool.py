"""
Raw frames of a simulated board capture, rendered ahead in a worker process.

    render_frame(camera, board, rvec, tvec, *, samples, seed, index, noise, bits)
        -> (H, W) uint8|uint16: pose ``index``'s quantized frame (noise from seed and index)
    pool = FramePool(camera, board, rvecs (P, 3), tvecs (P, 3), samples=64, seed=1,
                     noise=None, bits=8)
    pool.frame(k) -> (H, W) uint8|uint16   # waits for pose k's render (the same array)
    pool.queue_loop(key, rvecs (N, 3), tvecs (N, 3), samples, index)   # after the poses
    pool.loop(key) -> [(H, W)] * N        # waits for the loop's renders (noise [seed, index, n])
    pool.close()

A capture shows its poses in order, and each frame takes seconds to render (a focused camera
at 64 rays per pixel: about 2.6 s CPU at half size); the pool renders every pose in order in
one worker process from the start, so on a second core the frames are ready while the first
ones are being detected. The worker's frame is the one :func:`render_frame` gives in-process
(same optics, rays and noise draw); a worker that dies or fails gives its error when the frame
is asked for, never another frame, and the worker ends when its parent does (killed too). The
worker is spawned (a fork would copy the caller's running threads): a script that makes a pool
at import time needs the ``if __name__ == '__main__':`` guard of :mod:`multiprocessing`.
"""

import concurrent.futures
import multiprocessing
import os
import threading
import time

import numpy as np

from lf_mpc_calib.errors import InvalidInputError


def render_frame(camera, board, rvec, tvec, *, samples, seed, index, noise, bits):
    """Pose ``index``'s quantized raw frame (H, W) uint8 (bits 8) or uint16 (16): the board
    at (rvec (3,), tvec (3,)) with ``samples`` rays per pixel and the noise drawn from
    ``[seed, index]`` (noise None: the sensor's sigma; ``index`` an int or a tuple of ints,
    ``(pose, n)`` for frame n of a pose's live loop)."""
    from lf_mpc_calib.simulation.render import quantize, render_raw
    rng = np.random.default_rng([int(seed), *np.atleast_1d(index).astype(int).tolist()])
    raw = render_raw(camera, board, rvec, tvec, samples=samples, rng=rng, noise=noise)
    return quantize(raw, bits)


def _exit_with_parent(parent_pid):
    """The worker's initializer: end the worker once its parent is gone (a killed node), so
    that no orphan waits on its queue or renders on."""
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(0)
    threading.Thread(target=watch, daemon=True).start()


class FramePool:
    """Every pose's frame rendered in order in one worker process (module docstring)."""

    def __init__(self, camera, board, rvecs, tvecs, *, samples, seed, noise, bits):
        rvecs = np.asarray(rvecs, float).reshape(-1, 3)
        tvecs = np.asarray(tvecs, float).reshape(-1, 3)
        if rvecs.shape != tvecs.shape or len(rvecs) == 0:
            raise InvalidInputError(f'rvecs and tvecs must both be (P, 3) with P >= 1, got '
                                    f'{rvecs.shape} and {tvecs.shape}')
        self._executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context('spawn'),
            initializer=_exit_with_parent, initargs=(os.getpid(),))
        self._render = dict(camera=camera, board=board, seed=seed, noise=noise, bits=bits)
        self._futures = [self._submit(rvecs[k], tvecs[k], samples, k) for k in range(len(rvecs))]
        self._loops = {}

    def _submit(self, rvec, tvec, samples, index):
        return self._executor.submit(render_frame, rvec=rvec, tvec=tvec, samples=samples,
                                     index=index, **self._render)

    def __len__(self):
        return len(self._futures)

    def frame(self, index, timeout=None):
        """Pose ``index``'s frame (H, W), waiting up to ``timeout`` s (None: as long as it
        takes) for the worker; the worker's error if it failed."""
        if not 0 <= int(index) < len(self._futures):
            raise InvalidInputError(f'pose index {index}: expected 0 to '
                                    f'{len(self._futures) - 1}')
        return self._futures[int(index)].result(timeout)

    def queue_loop(self, key, rvecs, tvecs, *, samples, index):
        """Render the N frames of a loop at (rvecs, tvecs) (N, 3) after what is queued, each
        with the noise of ``[seed, index, n]``, kept under ``key`` (a second call with the same
        key queues nothing)."""
        if key not in self._loops:
            self._loops[key] = [self._submit(rv, tv, samples, (int(index), n))
                                for n, (rv, tv) in enumerate(zip(rvecs, tvecs))]

    def loop(self, key, timeout=None):
        """The frames [(H, W)] of the loop queued under ``key``, waiting for the worker (None:
        none was queued); the worker's error if it failed."""
        if key not in self._loops:
            return None
        return [f.result(timeout) for f in self._loops[key]]

    def close(self):
        """Stop the worker (renders not started are dropped)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

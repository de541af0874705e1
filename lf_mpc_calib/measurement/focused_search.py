"""
How a focused measurer finds the board in each frame: tracked, re-acquired, or searched in full.

:class:`CornerSearch` asks the :class:`~lf_mpc_calib.features.micro_image_tracking.
MicroImageCornerTracker` first (prediction from the last processed frame, then re-acquisition
seeded by the board's last place in the rendered image). Only when that has failed on
``lost_frames`` processed frames in a row (or nothing was detected yet) does the full detection
(:meth:`MicroImageCornerDetector.detect`, seconds a frame) run, the last resort:

- ``background=False``: in the caller's thread, on that frame;
- ``background=True`` (the decode node): in a thread of its own, on a copy of that frame, so
  that the caller goes on rendering and publishing every frame meanwhile (no corners while it
  runs: ``corner_search`` 'full search running: <why>'); its result is taken on the first
  frame after it ends, unless the tracker has re-acquired the board by itself since (then the
  tracker's own state, from a newer frame, is kept); when it found no board, why (markers of
  another board, say) is in the reason of the frames while the next one runs.

``last_full_search_s`` holds how long the last full detection took (None before the first).
:meth:`CornerSearch.close` stops a background search (its owner is shutting down).

    search = CornerSearch(detector, board, tracker, background=True)
    obs, corner_search, reason = search.find(raw (H, W), norm, rendered, w)
"""

import threading
import time

from lf_mpc_calib.errors import DetectionError


class CornerSearch:
    """
    Tracker first, full detection last (module docstring). detector: the
    MicroImageCornerDetector; board: the Checkerboard; tracker: a MicroImageCornerTracker of
    both, or None (every frame in full); background: run the full detection in its own thread;
    lost_frames: processed frames the tracker may fail in a row before the full detection.
    """

    def __init__(self, detector, board, tracker=None, *, background=False, lost_frames=2):
        self.det, self.board, self.tracker = detector, board, tracker
        self.background, self.lost_frames = bool(background), int(lost_frames)
        self.last_full_search_s = None
        self._thread = None
        self._result = None         # (Detection or None, error text, seconds) of the thread
        self._last_error = ''       # why the last background search found no board ('': it did)
        self._stop = threading.Event()

    def find(self, raw, norm, rendered, w):
        """
        (Observations or None, corner_search, reason) for one frame. raw (H, W): the frame as
        :meth:`MicroImageCornerDetector.detect` takes it; norm: it normalised; rendered (h, w):
        the image rendered from norm at inverse virtual depth w (normalised units).
        """
        self._collect()
        why = 'tracking off'
        if self.tracker is not None:
            obs, why = self.tracker.track(norm, rendered, w)
            if obs is not None:
                return obs, self.tracker.last_mode, ''
            if self.tracker.started and self.tracker.lost_frames < self.lost_frames:
                return None, f're-acquiring: {why}', f'the board was lost: {why}'
        if self.background and self.tracker is not None:
            return self._start_background(raw, why)
        return self._search_now(raw, why)

    def _search_now(self, raw, why):
        t0 = time.perf_counter()
        try:
            found = self.det.detect(raw, self.board)
        except DetectionError as exc:
            self.last_full_search_s = time.perf_counter() - t0
            return None, f'full search: {why}', str(exc)
        self.last_full_search_s = time.perf_counter() - t0
        if self.tracker is not None:
            self.tracker.start(found)
        return found.observations, f'full search: {why}', ''

    def _start_background(self, raw, why):
        if self._thread is None:
            # not a daemon (the default of a daemon's thread, as the node's worker): one that
            # the interpreter ends inside OpenCV at exit aborts the process
            self._thread = threading.Thread(target=self._run, args=(raw.copy(),),
                                            name='lf_full_corner_search', daemon=False)
            self._thread.start()
        reason = 'the board is searched for in the whole frame (the full search runs)'
        if self._last_error:    # the frames' reason until a search finds the board
            reason += f'; the last full search found no board: {self._last_error}'
        return None, f'full search running: {why}', reason

    def _run(self, raw):
        t0 = time.perf_counter()
        try:
            found, error = self.det.detect(raw, self.board, stop=self._stop), ''
        except DetectionError as exc:
            found, error = None, str(exc)
        self._result = (found, error, time.perf_counter() - t0)

    def close(self, timeout=2.0):
        """Stop a background full search (at its next corner or stage) and wait up to
        ``timeout`` s for its thread; no search starts after this."""
        self._stop.set()
        self.background = False
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _collect(self):
        """Take the background detection when it has ended (the tracker starts from it)."""
        if self._thread is None or self._thread.is_alive():
            return None
        self._thread.join()
        found, error, seconds = self._result
        self._thread = self._result = None
        self._last_error = '' if found is not None else error
        self.last_full_search_s = seconds
        if found is not None and not (self.tracker.started and self.tracker.lost_frames == 0):
            self.tracker.start(found)       # else re-acquired meanwhile, from a newer frame

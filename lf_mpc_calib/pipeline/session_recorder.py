"""
A calibration session that survives the death of its process: every accepted capture of a
:class:`~lf_mpc_calib.pipeline.session.CalibrationSession` goes to a session folder as it is
taken (:class:`lf_mpc_calib.io.capture_store.CaptureStore`), and a session started again on
that folder takes the captures back.

:meth:`SessionRecorder.start` (once, at start): removes the hidden ``.partial`` leftovers of
captures cut off, then detects every stored capture again with the stored white image (or the
session's own, when it has one already), exactly as when it was taken; a capture that cannot
be read or no longer shows the board is skipped and named, never fatal, and stays on disk.
Stored captures of another camera type, board or views are moved aside (as :meth:`reset`
does). Without a white image anywhere the captures wait until :meth:`white_set`.

:meth:`captured` after each accepted capture writes it; a write that fails (a full disk, a
folder that cannot be written) leaves no half capture, keeps the capture in memory, is
reported (:meth:`status`, the returned note) and tried again with the next capture.
:meth:`reset` moves the stored captures to ``<folder>_before_reset_<date-time>`` (never deletes
them) and forgets them in the session.

Not thread-safe: called under the same lock as the session.
"""

import numpy as np

from lf_mpc_calib.errors import LFCalibError
from lf_mpc_calib.io.atomic import remove_partials
from lf_mpc_calib.io.capture_store import CaptureStore

WRITE_ERRORS = (OSError, LFCalibError)


class SessionRecorder:
    """Keeps ``session``'s captures in ``folder`` (module docstring)."""

    def __init__(self, session, folder):
        self.session = session
        self.store = CaptureStore(folder)
        self.stored = []          # capture folder name per kept pose; None: not written
        self.found = 0            # complete capture folders found at start
        self.resumed = 0
        self.skipped = {}         # capture folder name -> why it was not resumed
        self.moved_aside = None   # where reset / a mismatch put the earlier captures
        self.write_error = None   # the last write that failed, while captures are unwritten
        self._pending = []        # capture folders waiting for a white image
        self._white_stored = None  # the white image session.yaml holds
        self._blocked = None      # why the folder is not written (start failed), or None

    # ---- start --------------------------------------------------------------------------
    def start(self):
        """Clean leftovers and resume the stored captures; returns log lines (str). A session
        folder that cannot be read or cleaned (OSError) is reported and written no more."""
        try:
            return self._start()
        except OSError as exc:
            self._blocked = f'the session folder {self.store.folder} cannot be used: {exc}'
            self.write_error = self._blocked + '; captures are kept in memory only'
            return [self.write_error]

    def _start(self):
        lines = [f'removed {p.name} in {self.store.folder}: a capture cut off when the node '
                 'stopped' for p in remove_partials(self.store.folder)]
        folders = self.store.capture_folders()
        if not folders:
            return lines
        try:
            setup = self.store.read_setup()
            if setup is None:
                raise LFCalibError(f'no {self.store.folder / "session.yaml"}')
            different = {k: (setup.get(k), v) for k, v in self._setup().items()
                         if setup.get(k) != v}
            if different:
                raise LFCalibError('taken with ' + ', '.join(
                    f'{k} {old} (now {new})' for k, (old, new) in different.items()))
        except LFCalibError as exc:
            self.moved_aside = self.store.move_aside()
            return lines + [f'{len(folders)} stored captures not resumed ({exc}); moved to '
                            f'{self.moved_aside}']
        self.found = len(folders)
        if not self.session.ready:
            try:
                white = self.store.read_white(setup)
                self.session.set_white(white)
                self._white_stored = white
            except LFCalibError as exc:
                self._pending = folders
                return lines + [f'captures found: {self.found}, waiting for a white image '
                                f'(the stored one: {exc})']
        self._pending = folders
        return lines + self._resume_pending()

    def _resume_pending(self):
        """Detect the pending stored captures again; returns log lines."""
        lines = []
        for folder in self._pending:
            try:
                stored = self.store.read_capture(folder)
                report = self.session.capture(stored.frame, robot_pose=stored.robot_pose)
            except LFCalibError as exc:
                self.skipped[folder.name] = str(exc)
                lines.append(f'skipped stored {folder.name}: {exc}')
                continue
            if not report.accepted:
                self.skipped[folder.name] = report.reason
                lines.append(f'skipped stored {folder.name}: {report.reason}')
                continue
            self.stored.append(folder.name)
            self.resumed += 1
            if report.observations != stored.rays:
                lines.append(f'stored {folder.name}: {report.observations} rays found now, '
                             f'{stored.rays} when it was taken')
        self._pending = []
        return lines + [self.summary() + f' from {self.store.folder}']

    # ---- as the session goes on ---------------------------------------------------------
    def white_set(self):
        """After the session's white image was set: store it, and resume captures that were
        waiting for it; returns log lines."""
        lines = self._resume_pending() if self._pending else []
        note = self._write_pending()
        return lines + ([note] if note else [])

    def captured(self, images=None):
        """After an accepted ``session.capture``: write the last pose (and any earlier one a
        failed write left in memory only). ``images``: {file name: uint8/uint16 image} stored
        with it. Returns '' or a note for the answer saying what could not be written."""
        self.stored.append(None)
        return self._write_pending(images)

    def _write_pending(self, images=None):
        """Write the white (when new) and every unwritten pose; '' or the error's note."""
        s = self.session
        if self._blocked:
            self.write_error = (f'{self._blocked}; {self.stored.count(None)} captures in memory '
                                'only (~/reset moves the folder aside and starts afresh)')
            return 'NOT on disk: ' + self.write_error
        try:
            if s.white is not None and self._white_stored is not s.white:
                self.store.write_setup(self._setup(), s.white)
                self._white_stored = s.white
            for k, name in enumerate(self.stored):
                if name is None:
                    extra = images if k == len(self.stored) - 1 else None
                    folder = self.store.write_capture(s.frames[k], s.detections[k].observations,
                                                      s.robot_poses[k], images=extra)
                    self.stored[k] = folder.name
        except WRITE_ERRORS as exc:
            unwritten = self.stored.count(None)
            self.write_error = (f'writing to {self.store.folder} failed: {exc}; {unwritten} '
                                f'captures in memory only (a restart loses them), written '
                                f'again with the next capture')
            return 'NOT on disk: ' + self.write_error
        self.write_error = None
        return ''

    def reset(self):
        """Move the stored captures aside and reset the session; returns a line saying where
        they went. OSError (nothing changed) when the folder cannot be moved."""
        self.moved_aside = self.store.move_aside()
        self.session.reset()
        self.stored, self._pending, self.skipped = [], [], {}
        self.found = self.resumed = 0
        self._white_stored = None
        self.write_error = self._blocked = None
        if self.moved_aside is None:
            return 'no stored captures to move'
        return f'stored captures moved to {self.moved_aside}'

    # ---- reporting ----------------------------------------------------------------------
    def summary(self):
        """One line: captures found at start and how many were resumed."""
        if not self.found:
            return 'captures found: 0'
        if self.resumed == self.found:
            return f'captures found: {self.found} (resumed)'
        return (f'captures found: {self.found} ({self.resumed} resumed, '
                f'{len(self.skipped)} skipped: {", ".join(sorted(self.skipped))})')

    def status(self):
        """A JSON-able mapping for a status message."""
        out = {'folder': str(self.store.folder), 'summary': self.summary(),
               'captures_found': self.found, 'resumed': self.resumed,
               'stored': sum(n is not None for n in self.stored),
               'unstored': self.stored.count(None)}
        if self.skipped:
            out['skipped'] = dict(self.skipped)
        if self._pending:
            out['waiting_for_white'] = len(self._pending)
        if self.moved_aside is not None:
            out['moved_aside'] = str(self.moved_aside)
        if self.write_error:
            out['write_error'] = self.write_error
        return out

    def _setup(self):
        """What stored captures must share with the session to be resumed."""
        s = self.session
        board = {k: v.item() if isinstance(v, np.generic) else v    # plain YAML numbers
                 for k, v in s.board.to_dict().items()}
        return {'camera_type': s.camera_type, 'board': board,
                'views': list(s.views), 'lens_types': s.lens_types}


__all__ = ['SessionRecorder']

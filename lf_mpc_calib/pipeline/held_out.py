"""
Captures held out of a calibration session and measured with its calibration (``~/verify``).

The first ``~/verify`` after a calibration marks the next captures as held out: they are
detected like any capture but kept apart (never among the session's poses, never journaled);
the next ``~/verify`` measures them with the session's calibration
(:func:`lf_mpc_calib.pipeline.verification.verify_calibration`) and gives the figures and the
verdict; ``~/save`` writes them as ``verification.yaml`` in the saved folder.

    held = HeldOutCaptures()
    held.verify(session)                    # -> (True, 'holding out the next captures ...')
    held.capture(session, raw, robot_pose)  # while held.holding: -> (accepted, message)
    held.verify(session)                    # -> (passed, 'verification passes: ...')
    held.status(), held.files()             # ~/status part, {'verification.yaml': text}
"""

import numpy as np
import yaml

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import DetectionError, InvalidInputError

VERIFICATION_FILE = 'verification.yaml'


class HeldOutCaptures:
    """
    The held-out captures of one session (module docstring). holding: the next captures are
    held out; observations: Observations per capture (pose id = its index); robot_poses:
    (rv, tv) base -> tool per capture or None; verification: the last Verification or None.
    """

    def __init__(self):
        self.holding = False
        self.observations = []
        self.robot_poses = []
        self.verification = None

    def reset(self):
        """Drop the held-out captures and the verification (the session's ~/reset)."""
        self.__init__()

    def capture(self, session, raw, robot_pose=None):
        """Detect the board in ``raw`` with the session's decoder and hold it out; returns
        (accepted, message). The session's poses are not touched."""
        k = len(self.observations)
        try:
            _, det = session.detect(raw, pose=k)
        except DetectionError as exc:
            return False, f'held-out frame rejected: {exc} ({k} held out)'
        self.observations.append(det.observations)
        self.robot_poses.append(None if robot_pose is None else
                                tuple(np.asarray(v, float).reshape(3) for v in robot_pose))
        self.verification = None
        return True, (f'held out for verification: capture {k} ({len(det.observations)} rays); '
                      f'{k + 1} held out, ~/verify measures them')

    def verify(self, session):
        """Mark the next captures as held out, or measure those held out; returns (success,
        message). Raises InvalidInputError before any calibration."""
        if session.result is None:
            raise InvalidInputError('not calibrated yet: ~/calibrate first, then ~/verify to '
                                    'hold out the next captures')
        if not self.observations:
            already = self.holding
            self.holding = True
            return not already, ('no held-out capture yet: ' if already else '') + (
                'holding out the next captures for verification: ~/capture new board poses '
                '(not used in the calibration), then ~/verify measures them')
        self.verification = self._measure(session)
        v = self.verification
        head = 'verification passes' if v.passed else 'verification does not pass: ' + \
            '; '.join(v.failures)
        figures = '; '.join(f.text() for f in v.figures)
        return v.passed, f'{head} ({len(v.poses)} held-out captures; {figures})'

    def _measure(self, session):
        from lf_mpc_calib.pipeline.verification import verify_calibration
        cal = session.calibration_file()
        obs = Observations.concatenate(self.observations)
        arm = None
        robot = {k: r for k, r in enumerate(self.robot_poses) if r is not None}
        if cal.hand_eye is not None and len(robot) >= 2:
            mount = (np.asarray(cal.hand_eye['rotation_vector'], float),
                     np.asarray(cal.hand_eye['translation_m'], float))
            arm = (str(cal.hand_eye['setup']), mount, robot)
        return verify_calibration(cal, obs, calibration_obs=session.observations, arm=arm)

    def status(self):
        """The ``verification`` part of ~/status: held-out count, and figures and verdict once
        measured."""
        out = {'holding': self.holding, 'held_out': len(self.observations)}
        if self.verification is not None:
            d = self.verification.to_dict()
            out.update(passed=d['passed'], failures=d['failures'], figures=d['figures'],
                       reused_poses=d['reused_poses'])
        return out

    def files(self):
        """{file name: text} for the saved session folder: verification.yaml once measured."""
        if self.verification is None:
            return {}
        return {VERIFICATION_FILE: yaml.safe_dump(self.verification.to_dict(),
                                                  sort_keys=False)}

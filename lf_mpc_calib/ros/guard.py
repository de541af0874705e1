"""
Guards at the node boundary: no exception from a service or subscription callback reaches
rclpy (where it would end the executor and, with it, the node and every captured pose).

:func:`guarded_service` answers ``success: false`` with the reason (the package's own errors
by their message, anything else by its type and message, shortened) and logs it;
:func:`guarded_callback` logs the reason at ERROR and drops the message. The session and
everything else the node holds are kept as they were: the session changes state only after a
step has succeeded.
"""

import functools

from lf_mpc_calib.errors import LFCalibError, shorten


def describe(exc):
    """One line naming what went wrong: our errors by message, others with their type."""
    text = str(exc) if isinstance(exc, LFCalibError) else f'{type(exc).__name__}: {exc}'
    return shorten(text, 500)


def guarded_service(node, name, handler):
    """``handler(request, response)`` that answers success false instead of raising."""
    @functools.wraps(handler)
    def guarded(request, response):
        try:
            return handler(request, response)
        except Exception as exc:  # noqa: B902 - the boundary: nothing may end the node
            response.success = False
            response.message = f'{name} failed: {describe(exc)}'
            node.get_logger().error(response.message + ' (the session is kept)')
            return response
    return guarded


def guarded_callback(node, name, callback):
    """``callback(msg)`` that logs an exception and drops the message instead of raising."""
    @functools.wraps(callback)
    def guarded(msg):
        try:
            return callback(msg)
        except Exception as exc:  # noqa: B902 - the boundary: nothing may end the node
            node.get_logger().error(f'{name}: message dropped: {describe(exc)}')
            return None
    return guarded


class CauseLog:
    """
    Errors of a stream of inputs logged once per cause, not once per message.

    Each channel ('frames', 'calibration', 'depth', ...) holds its current cause:
    :meth:`error` logs at ERROR (:meth:`waiting` at INFO, for a normal wait) only when the cause
    differs from the one held, :meth:`clear`
    logs once at INFO that the channel works again. ``active`` {channel: cause} is what is
    wrong now (for the stats topic); ``history`` [(channel, cause or '')] what was logged, on
    ``logger``.
    Thread-safe.
    """

    def __init__(self, logger):
        import threading
        self.logger = logger
        self._lock = threading.Lock()
        self.active = {}
        self.history = []

    def error(self, channel, cause):
        """Log ``cause`` for ``channel`` at ERROR unless it is the cause already logged
        there."""
        self._set(channel, cause, self.logger.error)

    def waiting(self, channel, cause):
        """The same as :meth:`error` at INFO, for a normal wait (no calibration yet): held
        as the channel's cause all the same."""
        self._set(channel, cause, self.logger.info)

    def _set(self, channel, cause, log):
        cause = shorten(str(cause), 500)
        with self._lock:
            if self.active.get(channel) == cause:
                return
            self.active[channel] = cause
            self.history.append((channel, cause))
        log(f'{channel}: {cause} (logged once until the cause changes)')

    def clear(self, channel):
        """The channel works again: log that once, if it had a cause."""
        with self._lock:
            cause = self.active.pop(channel, None)
            if cause is None:
                return
            self.history.append((channel, ''))
        self.logger.info(f'{channel}: working again (was: {cause})')

"""The log lines of one thing that keeps failing (:class:`OutageLog`), repeated with back-off.

Used by everything that retries on its own schedule — the Kubernetes watchers and the
Secret watches of Cluster objects (through :class:`slurmbridge.kube.watch.Outage`), the
Slurm pollers — so "how often does a lasting failure say so" has one answer:

* a **warning** when it starts failing;
* the warning **again** after ``repeat`` seconds, then after twice that, four times …, at
  most ``repeat_cap`` apart, each saying how long it has lasted and when it will be said
  again: a problem that lasts (a rejected token, an API server that never came back) is not
  said once and then lost among later lines, yet a long outage costs a handful of lines per
  hour, not one per attempt;
* **debug** lines for the attempts in between;
* one **info** line with the outage's length and attempts when it works again.

The clock is injectable (``clock``: a monotonic clock in seconds), so tests can drive the
back-off without waiting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class OutageLog:
    """The lines of one outage of ``what`` (e.g. ``"watch nodes"``), on ``logger``.

    ``repeat``: seconds after the first warning before it is said again (doubling after each
    repeat, capped at ``repeat_cap``); ``None`` never repeats.
    """

    def __init__(
        self,
        what: str,
        *,
        logger: logging.Logger | None = None,
        repeat: float | None = 60.0,
        repeat_cap: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.logger = logger or log
        self.repeat = repeat
        self.repeat_cap = repeat_cap
        self.clock = clock
        #: When the current outage began (``clock``), None while working.
        self.since: float | None = None
        #: Failed attempts in the current outage.
        self.attempts = 0
        #: The last failure's text ("" while working).
        self.reason = ""
        #: Warnings said in the current outage (the first included).
        self.warnings = 0
        self._next_at = 0.0
        self._gap = 0.0

    @property
    def failing(self) -> bool:
        """True from the first failure until :meth:`recovered`."""
        return self.since is not None

    def lasted(self) -> float:
        """Seconds since the current outage began (0 while working)."""
        return 0.0 if self.since is None else self.clock() - self.since

    def failed(
        self,
        reason: str,
        *,
        level: int = logging.WARNING,
        exc_info: BaseException | None = None,
        first: str = "failing",
    ) -> None:
        """Record one failed attempt, described by ``reason`` (one line, no secrets).

        The first failure of an outage and the repeats (module doc) are logged at ``level``
        (with ``exc_info``'s traceback on the first), naming the latest ``reason``; the others
        at debug (a reason that changes mid-outage, 503 then 429 from a restarting API server,
        is not news enough for a line of its own). ``first`` is the verb of the first line
        (``"crashed"`` for a bug rather than the server)."""
        now = self.clock()
        self.attempts += 1
        self.reason = reason
        if self.since is None:
            self.since = now
            self._gap = self.repeat or 0.0
            self._say(level, f"{self.what} {first} ({reason})", now, exc_info)
        elif self.repeat is not None and now >= self._next_at:
            lasted = now - self.since
            self._say(
                level,
                f"{self.what} still failing after {lasted:.1f} s and {self.attempts} attempts "
                f"({reason})",
                now,
                None,
            )
        else:
            self.logger.debug("%s still failing (%s)", self.what, reason)

    def _say(self, level: int, text: str, now: float, exc_info: BaseException | None) -> None:
        self.warnings += 1
        if self.repeat is None:
            self.logger.log(level, "%s; quiet until it recovers", text, exc_info=exc_info)
            return
        gap = self._gap
        self._next_at = now + gap
        self._gap = min(gap * 2, self.repeat_cap)
        self.logger.log(
            level, "%s; said again in %.1f s if it goes on", text, gap, exc_info=exc_info
        )

    def recovered(self) -> None:
        """It works again: log the outage once (when there was one)."""
        if self.since is None:
            return
        self.logger.info(
            "%s recovered after %.1f s (%d failed attempts)",
            self.what,
            self.clock() - self.since,
            self.attempts,
        )
        self.since = None
        self.attempts = 0
        self.reason = ""
        self.warnings = 0

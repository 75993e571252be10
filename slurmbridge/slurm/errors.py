"""Typed errors of the Slurm REST client, and how a slurmrestd answer maps onto them.

Callers decide on the type, never on message text: an effector retries :class:`Unavailable`
and :class:`Conflict`, treats :class:`NotFound` as "already gone", records :class:`Unsupported`
once (the API version cannot do it; retrying will not help) and gives up on :class:`Rejected`
(including :class:`Forbidden`: the token's user lacks the role, which no retry changes).

Why classify by ``error_number`` and not only by HTTP status: slurmrestd answers most Slurm
errors with HTTP 500 whatever their cause — an unknown node name is ``500`` with
``error_number`` 2018 (``ESLURM_INVALID_NODE_NAME``), an unreachable slurmctld is ``500`` with
1800 (``SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR``) on 22.05 — while newer releases map a few
numbers to other statuses (unknown job ⇒ 404, slurmctld unreachable ⇒ 502, a token slurmctld
rejects ⇒ 511), and Slurm 26.05 answers with 422 what 24.11 answers with 500 (recorded from
24.11.5 and 26.05.5). The errno set depends on the Slurm release, not on the API version a
request names. The number is the stable part; the status is a hint. Slurm 22.05 (v0.0.38)
spells the field ``errno`` in some answers and ``error_number`` in others; both are read.

The numbers come from ``slurm/slurm_errno.h`` (values checked against Slurm 22.05-26.05).

No error message built here ever contains the auth token: messages are assembled from the
HTTP status, Slurm's error texts and numbers, and the client scrubs server text before it gets
here (:func:`slurmbridge.slurm.client.SlurmClient`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = [
    "BadResponse",
    "Conflict",
    "Forbidden",
    "NotFound",
    "Rejected",
    "SlurmError",
    "Unauthorized",
    "Unavailable",
    "Unsupported",
    "classify",
]


class SlurmError(Exception):
    """Base of every Slurm client error.

    ``status``: HTTP status (0 when no response arrived). ``error_number``: Slurm's errno of
    the first error that has one (0 when none). ``errors``: Slurm's error texts, in order.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        error_number: int = 0,
        errors: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_number = error_number
        self.errors: tuple[str, ...] = tuple(errors)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status={self.status}, "
            f"error_number={self.error_number})"
        )


class NotFound(SlurmError):  # noqa: N818 (names fixed by the design)
    """The node / partition / job does not exist (Slurm 2000, 2017, 2018; HTTP 404)."""


class Conflict(SlurmError):  # noqa: N818 (names fixed by the design)
    """The request conflicts with the object's current state (invalid state transition,
    already exists, already done, nodes busy — e.g. deleting a node that still runs jobs;
    HTTP 409). Re-read and decide again."""


class Unavailable(SlurmError):  # noqa: N818 (names fixed by the design)
    """slurmrestd or slurmctld cannot be reached or timed out (connection errors, HTTP
    502/503/504, Slurm communication errors 1001-1004 and 1800-1805, standby controller).
    Transient: retry later."""


class Unauthorized(SlurmError):  # noqa: N818 (names fixed by the design)
    """Authentication failed (HTTP 401/403/511, Slurm 1007, 6000-6011, 9004/9005/9008), or the
    token file cannot be read. A rotated or corrected token may cure it."""


class MissingToken(Unauthorized):
    """There is no token to send: the token file is unreadable or empty, or the Kubernetes
    Secret holding it (or its key) is missing. Nothing was sent to slurmrestd."""


class Rejected(SlurmError):  # noqa: N818 (names fixed by the design)
    """Slurm refused the request for another reason; ``errors`` has Slurm's text and
    ``error_number`` its errno. Not transient as such: do not retry blindly."""


class Forbidden(Rejected):
    """The token was accepted, but its user may not do this (Slurm 2002
    ``ESLURM_ACCESS_DENIED``, 2010 ``ESLURM_USER_ID_MISSING``): e.g. setting a job's
    ``admin_comment``, updating, creating or deleting nodes on Slurm 24.11+ without the
    operator or administrator role (``sacctmgr modify user <name> set adminlevel=operator``,
    or the token of ``SlurmUser``/root). Permanent for the request: retrying with the same
    token cannot succeed (docs/slurm.md says which role each reconciler needs)."""


class BadResponse(SlurmError):  # noqa: N818 (names fixed by the design)
    """The answer does not have the shape this API version documents (not JSON, a required
    field of the wrong type, a malformed hostlist)."""


class Unsupported(SlurmError):  # noqa: N818 (names fixed by the design)
    """The negotiated API version does not offer ``operation`` (e.g. ``update_node`` on
    v0.0.38, where slurmrestd answers 405). Record once; retrying cannot help."""

    def __init__(self, version: str, operation: str, message: str = "", *, status: int = 0):
        super().__init__(
            message or f"slurmrestd API {version or '(unknown)'} does not offer {operation}",
            status=status,
        )
        self.version = version
        self.operation = operation


# --- classification ---------------------------------------------------------------------------

_NOT_FOUND: Final = frozenset(
    {
        2000,  # ESLURM_INVALID_PARTITION_NAME
        2017,  # ESLURM_INVALID_JOB_ID
        2018,  # ESLURM_INVALID_NODE_NAME
    }
)
#: Slurm's own line (``slurm_strerror``) for each errno that says a job does not exist or is
#: done: an answer with the number but another text is not Slurm's word on the job, so it is
#: never read as "gone" (Slinky slurm-bridge 1.3 ``internal/runnable/slurmjob/slurmcontrol/
#: slurmcontrol.go`` ``tolerateError`` matches the whole error text).
JOB_GONE_LINES: Final = {
    2017: "Invalid job id specified",  # ESLURM_INVALID_JOB_ID
    2021: "Job/step already completing or completed",  # ESLURM_ALREADY_DONE
}


def says_job_gone(number: int, text: str) -> bool:
    """``text`` is, word for word, Slurm's line for ``number`` in :data:`JOB_GONE_LINES`."""
    line = JOB_GONE_LINES.get(number)
    return line is not None and text.strip() == line


_CONFLICT: Final = frozenset(
    {
        2011,  # ESLURM_DUPLICATE_JOB_ID
        2016,  # ESLURM_NODES_BUSY (e.g. deleting a node that is in use or reserved)
        2020,  # ESLURM_TRANSITION_STATE_NO_UPDATE
        2021,  # ESLURM_ALREADY_DONE
        2028,  # ESLURM_INVALID_NODE_STATE (24.11/25.05 answer to e.g. RESUME on an idle node)
        2075,  # ESLURM_PARTITION_IN_USE (deleting a partition with jobs; 26.05.5: HTTP 422)
        2168,  # ESLURM_NODE_ALREADY_EXISTS (POST new/node/ for a name slurmctld knows)
        2180,  # ESLURM_INVALID_NODE_STATE_TRANSITION (25.11+)
    }
)
_UNAVAILABLE: Final = frozenset(
    {
        1001,
        1002,
        1003,
        1004,  # SLURM_COMMUNICATIONS_{CONNECTION,SEND,RECEIVE,SHUTDOWN}_ERROR
        1800,
        1801,
        1802,
        1803,
        1804,
        1805,  # SLURMCTLD_COMMUNICATIONS_* (incl. BACKOFF)
        2027,  # ESLURM_IN_STANDBY_MODE
        2131,  # ESLURM_IN_STANDBY_USE_BACKUP
        5003,
        5004,
        5005,  # incomplete packet, socket timeout, zero bytes sent
        7000,  # ESLURM_DB_CONNECTION
    }
)
_FORBIDDEN: Final = frozenset(
    {
        2002,  # ESLURM_ACCESS_DENIED
        2010,  # ESLURM_USER_ID_MISSING
    }
)
_UNAUTHORIZED: Final = frozenset(
    {
        1007,  # SLURM_PROTOCOL_AUTHENTICATION_ERROR
        *range(6000, 6012),  # ESLURM_AUTH_*
        9004,
        9005,  # ESLURM_REST_MISSING_UID / _GID
        9008,  # ESLURM_REST_AUTH_FAIL
    }
)


def classify(
    status: int,
    error_number: int,
    message: str,
    errors: Sequence[str] = (),
) -> SlurmError:
    """The typed error for an HTTP status and Slurm errno (``error_number`` 0 = none).

    Order: authentication statuses (401/403/511) and gateway statuses (502/503/504) first —
    those answers may come from a proxy in front of slurmrestd and carry no Slurm number —
    then the Slurm number, then the remaining statuses (404 ⇒ NotFound, 409 ⇒ Conflict);
    anything else is :class:`Rejected`. 2017 and 2021 count only with Slurm's exact line
    among ``errors`` (:data:`JOB_GONE_LINES`); with another text they are :class:`Rejected`.
    """
    cls: type[SlurmError] = Rejected
    if status in (401, 403, 511):
        cls = Unauthorized
    elif status in (502, 503, 504):
        cls = Unavailable
    elif error_number in JOB_GONE_LINES and not any(says_job_gone(error_number, t) for t in errors):
        cls = Rejected  # the job's number without Slurm's line: not Slurm's word on the job
    elif error_number in _NOT_FOUND:
        cls = NotFound
    elif error_number in _CONFLICT:
        cls = Conflict
    elif error_number in _UNAVAILABLE:
        cls = Unavailable
    elif error_number in _UNAUTHORIZED:
        cls = Unauthorized
    elif error_number in _FORBIDDEN:
        cls = Forbidden
    elif status == 404:
        cls = NotFound
    elif status == 409:
        cls = Conflict
    return cls(message, status=status, error_number=error_number, errors=errors)

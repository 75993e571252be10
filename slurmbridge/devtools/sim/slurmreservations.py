"""Slurm reservations for the slurmrestd simulator (mixed into
:class:`~slurmbridge.devtools.sim.slurmrestd.SlurmSim`).

What it serves, as Slurm 26.05.5 answered it (recorded with the chroot rig,
``slurmbridge.devtools.realslurm_modern``) and as the OpenAPI documents in
``/work/shared/slurm-openapi`` list the paths:

* ``GET reservations/`` (v0.0.41+; the simulator serves it from v0.0.42): every reservation,
  ``[]`` when none.
* ``GET reservation/{name}``: the one reservation; an unknown name answers HTTP 200 with an
  ``errors`` entry "Unable to query reservations" (error_number 0) while no reservation
  exists at all, and the release's failure status (422 on 26.05) with error 9000 "Unable to
  find reservation <name>" while others exist.
* ``POST reservation`` (v0.0.43+ only; v0.0.42's document has no such method): creates the
  reservation, or updates the one of that name (slurmrestd tries an update first). An
  update naming a start time of a started reservation is refused with 2104 "Reservation
  already started"; ``FORCE_START`` without a recurrence flag is refused with 2053
  ("FORCE_START flag requires a reoccuring reservation"). The answer echoes the
  description in ``reservations``.
* ``DELETE reservation/{name}`` (v0.0.43+): an unknown name is 2053 ("Requested reservation
  is invalid") at the failure status.
* A node inside an active reservation shows ``RESERVED`` in its state, ``MAINTENANCE`` too
  when the reservation has ``MAINT``, and ``reservation: <name>``; a reservation that starts
  or ends moves the nodes' change time (slurmctld ``set_node_maint_mode`` bumps
  ``last_node_update``), so a conditional node listing sees it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from slurmbridge.slurm import hostlist

log = logging.getLogger(__name__)

Json = dict[str, Any]

#: ESLURM_RESERVATION_INVALID, ESLURM_RESERVATION_BUSY-like "already started" (slurm_errno.h:
#: ESLURM_RSV_ALREADY_STARTED), ESLURM_REST_EMPTY_RESULT.
RESERVATION_INVALID: Final = 2053
ALREADY_STARTED: Final = 2104
EMPTY_RESULT: Final = 9000
#: Recurrence flags (slurm-operator slurmcontrol.go ``reoccuringInfoFlags``).
RECURRING: Final = frozenset({"HOURLY", "DAILY", "WEEKLY", "WEEKDAY", "WEEKEND"})
#: Versions with ``POST reservation`` / ``DELETE reservation/{name}``.
WRITE_VERSIONS: Final = frozenset({"v0.0.43", "v0.0.44", "v0.0.45"})


@dataclass
class SimReservation:
    """One reservation: ``start`` / ``end`` epoch seconds, flags upper case."""

    name: str
    nodes: tuple[str, ...]
    start: int
    end: int
    flags: tuple[str, ...] = ()
    users: tuple[str, ...] = ()

    def active(self, now: float) -> bool:
        return self.start <= now < self.end


def _number(value: object) -> int | None:
    """A ``*_no_val_struct`` (``{"set": true, "number": N}``) or a bare integer."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        number = value.get("number")
        return int(number) if isinstance(number, int) else None
    return value if isinstance(value, int) else None


def _names(value: object) -> tuple[str, ...]:
    """A hostlist or csv string, or a list of them, expanded."""
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            if part:
                out.extend(hostlist.expand(part))
    return tuple(out)


class ReservationsMixin:
    """Reservation state and REST handlers; needs the host's nodes, clock and errors."""

    versions: tuple[str, ...]

    if TYPE_CHECKING:  # provided by SlurmSim

        def _now(self) -> int: ...
        def _touch_nodes(self) -> None: ...
        def _request_version(self, request: web.Request) -> str: ...
        def _fail_status(self, version: str) -> int: ...
        def _is_operator(self, request: web.Request) -> bool: ...
        def _ok(self, version: str, request: web.Request, payload: Json) -> web.Response: ...
        def _error(
            self,
            version: str,
            endpoint: str,
            status: int,
            errno: int,
            description: str,
            source: str,
            request: web.Request | None = None,
        ) -> web.Response: ...

    def _init_reservations(self) -> None:
        self.reservations: dict[str, SimReservation] = {}
        self._active_reservations: frozenset[str] = frozenset()

    # --- state ----------------------------------------------------------------------------

    def reservation_tick(self) -> None:
        """Move the nodes' change time when a reservation started or ended since the last
        look (slurmctld bumps ``last_node_update`` when it sets or clears MAINT)."""
        now = self._now()
        active = frozenset(r.name for r in self.reservations.values() if r.active(now))
        if active != self._active_reservations:
            self._active_reservations = active
            self._touch_nodes()

    def node_reservation(self, name: str) -> tuple[str, tuple[str, ...]]:
        """The active reservation node ``name`` is in and the state flags it adds
        (``RESERVED``, and ``MAINTENANCE`` for a MAINT one); ``("", ())`` none."""
        now = self._now()
        for r in self.reservations.values():
            if name in r.nodes and r.active(now):
                flags = ("RESERVED", "MAINTENANCE") if "MAINT" in r.flags else ("RESERVED",)
                return r.name, flags
        return "", ()

    def _render_reservation(self, r: SimReservation) -> Json:
        flags = list(r.flags)
        if r.nodes and "SPEC_NODES" not in flags:
            flags.append("SPEC_NODES")  # Slurm adds it to a reservation made of a node list
        return {
            "accounts": "",
            "burst_buffer": "",
            "core_count": 2 * len(r.nodes),
            "core_specializations": [],
            "end_time": {"set": True, "infinite": False, "number": r.end},
            "features": "",
            "flags": flags,
            "groups": "",
            "licenses": "",
            "max_start_delay": 0,
            "name": r.name,
            "node_count": len(r.nodes),
            "node_list": hostlist.compress(r.nodes),
            "partition": "",
            "purge_completed": {"time": {"set": True, "infinite": False, "number": 300}},
            "start_time": {"set": True, "infinite": False, "number": r.start},
            "tres": f"cpu={2 * len(r.nodes)}",
            "users": ",".join(r.users),
        }

    # --- REST -----------------------------------------------------------------------------

    def add_reservation_routes(self, router: web.UrlDispatcher, version: str) -> None:
        base = f"/slurm/{version}"
        router.add_get(f"{base}/reservations", self._get_reservations)
        router.add_get(f"{base}/reservations/", self._get_reservations)
        router.add_get(f"{base}/reservation/{{reservation_name}}", self._get_reservation)
        if version in WRITE_VERSIONS:
            router.add_post(f"{base}/reservation", self._post_reservation)
            router.add_delete(f"{base}/reservation/{{reservation_name}}", self._delete_reservation)

    async def _get_reservations(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        self.reservation_tick()
        listed = [self._render_reservation(r) for r in self.reservations.values()]
        payload: Json = {
            "reservations": listed,
            "last_update": {"set": True, "infinite": False, "number": self._now()},
        }
        return self._ok(v, request, payload)

    async def _get_reservation(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        name = request.match_info["reservation_name"]
        r = self.reservations.get(name)
        if r is None:
            if not self.reservations:
                return self._error(
                    v, "reservation", 200, 0, "Unable to query reservations",
                    "slurm_load_reservations()", request,
                )  # fmt: skip
            return self._error(
                v, "reservation", self._fail_status(v), EMPTY_RESULT,
                f"Unable to find reservation {name}", "_get_single_reservation", request,
            )  # fmt: skip
        payload: Json = {
            "reservations": [self._render_reservation(r)],
            "last_update": {"set": True, "infinite": False, "number": self._now()},
        }
        return self._ok(v, request, payload)

    async def _post_reservation(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        fail = self._fail_status(v)
        try:
            body = await request.json()
        except ValueError as exc:
            return self._error(v, "reservation", 400, 9001, str(exc), "_parse", request)
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            return self._error(
                v, "reservation", fail, RESERVATION_INVALID, "reservation needs a name",
                "validate_resv_create_desc", request,
            )  # fmt: skip
        if not self._is_operator(request):
            return self._error(
                v, "reservation", fail, 2010, "Error creating reservation",
                "slurm_create_reservation", request,
            )  # fmt: skip
        name = str(body["name"])
        now = self._now()
        flags = tuple(str(f).upper() for f in body.get("flags") or ())
        start = _number(body.get("start_time"))
        minutes = _number(body.get("duration"))
        current = self.reservations.get(name)
        if current is not None:
            if current.active(now) and start is not None:
                return self._error(
                    v, "reservation", fail, ALREADY_STARTED,
                    f"Error updating reservation {name}", "slurm_update_reservation", request,
                )  # fmt: skip
            if "node_list" in body:
                current.nodes = _names(body["node_list"])
            if start is not None:
                length = current.end - current.start
                current.start, current.end = start, start + length
            if minutes is not None:
                current.end = current.start + minutes * 60
            if flags:
                current.flags = flags
            if body.get("users"):
                current.users = _names(body["users"])
        else:
            if "FORCE_START" in flags and not RECURRING & set(flags):
                return self._error(
                    v, "reservation", fail, RESERVATION_INVALID,
                    "FORCE_START flag requires a reoccuring reservation. No reservation "
                    "created.", "validate_resv_create_desc", request,
                )  # fmt: skip
            begin = now if start is None else start
            self.reservations[name] = SimReservation(
                name=name,
                nodes=_names(body.get("node_list")),
                start=begin,
                end=begin + (minutes if minutes is not None else 24 * 60) * 60,
                flags=flags,
                users=_names(body.get("users")),
            )
        self.reservation_tick()
        return self._ok(v, request, {"reservations": [body]})

    async def _delete_reservation(self, request: web.Request) -> web.Response:
        v = self._request_version(request)
        name = request.match_info["reservation_name"]
        if not self._is_operator(request):
            return self._error(
                v, "reservation", self._fail_status(v), 2010,
                f"Error deleting reservation {name}", "slurm_delete_reservation", request,
            )  # fmt: skip
        if self.reservations.pop(name, None) is None:
            return self._error(
                v, "reservation", self._fail_status(v), RESERVATION_INVALID,
                f"Error deleting reservation {name}", "slurm_delete_reservation", request,
            )  # fmt: skip
        self.reservation_tick()
        return self._ok(v, request, {})

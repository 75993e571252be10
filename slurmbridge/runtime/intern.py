"""Canonical copies of the values that observations repeat, so a projection stores each once.

:class:`Projection.feed <slurmbridge.runtime.projection.Projection.feed>` decodes every message
into a
new event, and msgspec makes a new object for every string, int, tuple and nested struct in
it: 150,000 pods each carry their own ``"batch/v1"``, their own copy of the same finalizers,
tolerations and label keys, and each pod of a Job its own copy of the Job's owner reference.
:class:`Canonicalizer` replaces such values in a freshly decoded event by an *equal* object
seen before, so the projection keeps one copy (issue 7: the projection's memory).

Choices that are not obvious:

* Only values equal to the one replaced are substituted (``==`` and same type: bools, floats
  and ints never meet in one cache), so no reader can observe a difference other than
  ``is``. Events are frozen; the substitution uses :func:`msgspec.structs.force_setattr` on
  an event (and nested structs) the caller just decoded and no one else holds yet.
* Fields unique to one object (:data:`UNIQUE_FIELDS`: key, uid, name, version …) are left
  alone: caching them would only evict the values worth sharing.
* Each cache is bounded: two generations of at most ``limit`` entries; a value found in the
  old generation moves to the new one, and when the new one is full the old is dropped. A
  long-running worker with churn therefore never holds more than ``2 × limit`` cached values
  per cache, and values still in use stay shared.
* Dicts (labels, annotations) are rebuilt with canonical keys and values but never shared
  (they are mutable); tuples and frozen nested structs are shared whole, except the node lists
  of Slurm jobs and partitions (:data:`ELEMENT_FIELDS`), whose elements are shared instead.
* It runs for every message a projection receives (catch-up: hundreds of thousands in a
  row), so the per-type work is written out once as a small generated function (like
  :mod:`dataclasses` does), one branch per field chosen from its declared type; a loop over
  the fields with a dispatch per value cost about twice as much. It still adds a few
  microseconds per event (most for a pod's labels, whose dict is rebuilt).
"""

from __future__ import annotations

from collections.abc import Callable
from types import UnionType
from typing import Any, Final, Literal, TypeVar, Union, get_args, get_origin

import msgspec

T = TypeVar("T")
S = TypeVar("S", bound=msgspec.Struct)

#: Event fields whose values are (nearly) unique per object: never cached.
UNIQUE_FIELDS: Final = frozenset(
    {"key", "uid", "name", "version", "observed_at", "job_id", "admin_comment", "comment", "op"}
)

#: Tuple fields whose elements repeat across objects but whose combination rarely does.
ELEMENT_FIELDS: Final = frozenset({"nodes", "excluded_nodes"})

#: Entries per generation of each cache (strings, ints, tuples and structs): ~2.5 MB of
#: dict per full generation, enough for the repeated values of a few hundred thousand
#: objects (a Job's uid and name are shared by its pods while they are live).
DEFAULT_LIMIT: Final = 1 << 16


class BoundedCache:
    """value → the canonical equal value, bounded to two generations of ``limit`` entries."""

    __slots__ = ("_new", "_old", "limit", "on_rotate")

    def __init__(
        self, limit: int = DEFAULT_LIMIT, on_rotate: Callable[[], None] | None = None
    ) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self.on_rotate = on_rotate  # called when a new generation starts (or on clear)
        self._new: dict[Any, Any] = {}
        self._old: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def get(self, value: T) -> T:
        """The canonical object equal to ``value`` (``value`` itself when first seen)."""
        found = self._new.get(value)
        if found is not None:
            return found  # type: ignore[no-any-return]
        found = self._old.pop(value, None)
        if found is None:
            found = value
        if len(self._new) >= self.limit:
            self._old = self._new
            self._new = {}
            if self.on_rotate is not None:
                self.on_rotate()
        self._new[found] = found
        return found

    def clear(self) -> None:
        """Forget every cached value."""
        self._new = {}
        self._old = {}
        if self.on_rotate is not None:
            self.on_rotate()


_STR, _INT, _STR_DICT, _TUPLE, _ELEMENTS, _HASHABLE, _OTHER = range(7)

#: The code canonicalising one field, by how (``{f}``: the field's name).
_TEMPLATES: Final = {
    _STR: """
    v = ev.{f}
    if v:
        c = sget(v) or sput(v)
        if c is not v:
            setter(ev, "{f}", c)""",
    _INT: """
    v = ev.{f}
    if v is not None and not -5 <= v <= 256:  # CPython shares -5..256
        c = iget(v) or iput(v)
        if c is not v:
            setter(ev, "{f}", c)""",
    _STR_DICT: """
    v = ev.{f}
    if v:
        setter(ev, "{f}", {{(sget(k) or sput(k)): (sget(x) or sput(x)) for k, x in v.items()}})""",
    _ELEMENTS: """
    v = ev.{f}
    if v:
        setter(ev, "{f}", tuple([sget(x) or sput(x) for x in v]))""",
    _TUPLE: """
    v = ev.{f}
    if v:
        c = cget(v) or value(v)
        if c is not v:
            setter(ev, "{f}", c)""",
    _HASHABLE: """
    v = ev.{f}
    if v is not None:
        c = cget(v) or value(v)
        if c is not v:
            setter(ev, "{f}", c)""",
    _OTHER: """
    v = ev.{f}
    c = value(v)
    if c is not v:
        setter(ev, "{f}", c)""",
}

_Canon = Callable[..., None]


def _how(name: str, tp: Any) -> int | None:
    """How to canonicalise field ``name`` of declared type ``tp`` (None: leave it)."""
    if name in UNIQUE_FIELDS or tp in (bool, float, bool | None, float | None):
        return None
    if get_origin(tp) is Literal:  # decoded as the schema's own interned strings
        return None
    if tp in (str, str | None):
        return _STR
    if tp in (int, int | None):
        return _INT
    if tp == dict[str, str]:
        return _STR_DICT
    if tp == tuple[str, ...] and name in ELEMENT_FIELDS:
        return _ELEMENTS
    if get_origin(tp) is tuple:
        return _TUPLE if _hashable(tp) else _OTHER
    return _HASHABLE if _hashable(tp) else _OTHER


def _hashable(tp: Any) -> bool:
    """True when every value of type ``tp`` is hashable (frozen structs, tuples, scalars)."""
    if tp in (str, int, float, bool, type(None)) or get_origin(tp) is Literal:
        return True
    if get_origin(tp) in (tuple, Union, UnionType):
        return all(_hashable(a) for a in get_args(tp) if a is not Ellipsis)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return bool(tp.__struct_config__.frozen) and all(
            _hashable(f.type) for f in msgspec.structs.fields(tp)
        )
    return False


def _compile(cls: type) -> _Canon:
    """The function that canonicalises the fields of a ``cls`` instance, one branch per field
    chosen from its declared type and written out (no per-field dispatch: this runs for every
    message a projection receives, and a loop over a plan cost twice the time)."""
    lines = [
        "def canon(ev, sget, sput, iget, iput, cget, value, setter):",
        "    v = c = None",
    ]
    for info in msgspec.structs.fields(cls):
        how = _how(info.name, info.type)
        if how is not None:
            if not info.name.isidentifier():  # never for a Struct field; guards the exec
                raise ValueError(f"{cls.__name__}.{info.name}: not an identifier")
            lines.append(_TEMPLATES[how].format(f=info.name))
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)  # noqa: S102 - source built above from field names
    return namespace["canon"]  # type: ignore[no-any-return]


class Canonicalizer:
    """Replaces repeated values of freshly decoded events by shared equal ones (see module)."""

    __slots__ = ("_args", "_composites", "_funcs", "_ints", "_strs")

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._strs = BoundedCache(limit, self._bind)
        self._ints = BoundedCache(limit, self._bind)
        self._composites = BoundedCache(limit, self._bind)
        self._funcs: dict[type, _Canon] = {}
        self._bind()

    def _bind(self) -> None:
        """Bind the lookups the generated functions take (again when a generation starts)."""
        self._args = (
            self._strs._new.get,
            self._strs.get,
            self._ints._new.get,
            self._ints.get,
            self._composites._new.get,
            self.value,
            msgspec.structs.force_setattr,
        )

    def cached(self) -> int:
        """Values held by the caches (for tests and metrics)."""
        return len(self._strs) + len(self._ints) + len(self._composites)

    def clear(self) -> None:
        """Forget every cached value."""
        self._strs.clear()
        self._ints.clear()
        self._composites.clear()

    def event(self, ev: S) -> S:
        """Canonicalise ``ev`` in place and return it.

        ``ev`` must be a msgspec Struct the caller owns (just decoded): its non-unique fields
        are replaced by equal, shared values.
        """
        fn = self._funcs.get(type(ev))
        if fn is None:
            fn = self._funcs[type(ev)] = _compile(type(ev))
        fn(ev, *self._args)
        return ev

    def value(self, value: T) -> T:
        """The canonical object equal to ``value``; nested structs are canonicalised in place
        (they must be the caller's own), dicts are rebuilt with canonical keys and values."""
        kind = type(value)
        if kind is str:
            return self._strs.get(value) if value else value
        if kind is int:
            # CPython shares -5..256 already.
            return value if -5 <= value <= 256 else self._ints.get(value)  # type: ignore[operator]
        if kind is tuple:
            if not value:
                return value
            try:
                found = self._composites._new.get(value)
                if found is not None:
                    return found  # type: ignore[no-any-return]
                canon = tuple([self.value(v) for v in value])  # type: ignore[attr-defined]
                return self._composites.get(canon)  # type: ignore[return-value]
            except TypeError:  # an unhashable element
                return value
        if kind is dict:
            if not value:
                return value
            strs = self._strs
            return {  # type: ignore[return-value]
                (strs.get(k) if type(k) is str else k): self.value(v)
                for k, v in value.items()  # type: ignore[attr-defined]
            }
        if isinstance(value, msgspec.Struct):
            frozen = value.__struct_config__.frozen
            if frozen:
                try:
                    found = self._composites._new.get(value)
                except TypeError:  # an unhashable field
                    frozen = False
                else:
                    if found is not None:
                        return found  # type: ignore[no-any-return]
            for field in value.__struct_fields__:
                inner = getattr(value, field)
                canon = self.value(inner)
                if canon is not inner:
                    msgspec.structs.force_setattr(value, field, canon)
            return self._composites.get(value) if frozen else value
        return value

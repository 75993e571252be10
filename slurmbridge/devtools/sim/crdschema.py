"""Structural schemas of custom resources, applied as kube-apiserver applies a CRD's.

The Kubernetes simulator (:mod:`slurmbridge.devtools.sim.kube`) serves the project's CRDs
(``crds/``, copies of ``deploy/crds`` kept equal by tests/unit/test_crds.py). A real API server
never stores what a CRD's schema refuses, so the simulator must not either: a simulator kinder
than the real server hides bugs (a bad ``scalingMode`` got 201 here where kube-apiserver answers
422). On every create, update and patch of such a resource, in the order the
apiextensions-apiserver uses (k8s.io/apiextensions-apiserver):

1. **Pruning** (``pkg/apiserver/schema/pruning/algorithm.go``): fields the schema does not
   name are dropped, unless the node says ``x-kubernetes-preserve-unknown-fields`` or has
   ``additionalProperties``; at the root ``apiVersion``, ``kind`` and ``metadata`` stay.
2. **Nulls, then defaults** (``pkg/apiserver/schema/defaulting/prunenulls.go``,
   ``algorithm.go``): a ``null`` in a field that is not ``nullable`` is dropped, or replaced
   by the field's ``default`` when it has one; then every absent field with a ``default`` gets
   a copy of it, at every depth of the object that exists.
3. **Validation** (``pkg/apiserver/validation/validation.go``
   ``kubeOpenAPIResultToFieldErrors`` over kube-openapi ``pkg/validation/validate``):
   type, ``enum``, ``maximum``/``minimum``, ``maxLength``/``minLength``, ``pattern``,
   ``maxItems``/``minItems``, ``required``, ``format: date-time``. Each failure is a cause
   named by its field path, with apimachinery's wording (``field.NotSupported``:
   ``Unsupported value: "bogus": supported values: "DaemonSet", "StatefulSet"``;
   ``field.Invalid`` with kube-openapi's detail: ``spec.replicas in body should be less than
   or equal to 10000``; ``field.TooLong``: ``Too long: may not be more than 253 bytes`` …).
4. **CEL** (``x-kubernetes-validations``; ``pkg/apiserver/schema/cel/validation.go``),
   evaluated with cel-python when it is installed (the project's test extra; it is not a
   runtime dependency): a rule that is false is ``Invalid value: <message>`` at the node's
   path (the value omitted for objects and lists); skipped, with one cause saying so, when
   step 3 found a type, enum, required or size error (``pkg/registry/customresource/
   strategy.go`` ``hasBlockingErr``). Without cel-python the rules are **not** checked and
   the simulator logs that once: the simulator then is kinder than a real server there.
5. **Ratcheting** on update (``CRDValidationRatcheting``, on by default since Kubernetes
   1.30): an error in a field whose value the update did not change is not reported, so an
   object stored before a tighter schema can still have its status written.

Not modelled: ``x-kubernetes-list-type`` uniqueness, ``x-kubernetes-embedded-resource``,
formats other than ``date-time``, ``messageExpression``, CEL cost limits, ``oldSelf``
(transition rules are skipped, as on a create). The simulator also prunes and defaults an
object read at another served version than the stored one (``kube._to_version``).
"""

from __future__ import annotations

import copy
import importlib
import logging
import re
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Final

import orjson
import yaml

log = logging.getLogger(__name__)

Obj = dict[str, Any]
#: ``(field path, cause type, message without the path)``, as the simulator's ``_invalid``.
Cause = tuple[str, str, str]

CRDS: Final = Path(__file__).parent / "crds"
#: Cause types that keep the CEL rules from running (strategy.go ``hasBlockingErr``).
BLOCKING: Final = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
#: The cause added when they do (strategy.go: ``field.Invalid(nil, nil, …)`` prints a nil
#: path as ``<nil>`` and a nil value as ``"null"``).
NOT_CHECKED: Final[Cause] = (
    "<nil>",
    "FieldValueInvalid",
    'Invalid value: "null": some validation rules were not checked because the object was '
    "invalid; correct the existing errors to complete validation",
)
_ROOT_KEPT: Final = ("apiVersion", "kind", "metadata")


def crd_schemas(name: str) -> dict[str, Obj]:
    """``openAPIV3Schema`` by version of packaged CRD ``name`` (``nodesets.slinky.slurm.net``);
    raises OSError when it is not packaged."""
    return dict(_load(name))


def crd_printer_columns(name: str) -> dict[str, tuple[Obj, ...]]:
    """``additionalPrinterColumns`` by served version of packaged CRD ``name``."""
    doc = _doc(name)
    return {
        v["name"]: tuple(v.get("additionalPrinterColumns") or ())
        for v in doc["spec"]["versions"]
        if v.get("served")
    }


def crd_names(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(shortNames, categories)`` of packaged CRD ``name``."""
    names = _doc(name)["spec"]["names"]
    return tuple(names.get("shortNames") or ()), tuple(names.get("categories") or ())


@cache
def _doc(name: str) -> Obj:
    doc: Obj = yaml.safe_load((CRDS / f"{name}.yaml").read_text())
    return doc


@cache
def _load(name: str) -> tuple[tuple[str, Obj], ...]:
    doc = _doc(name)
    return tuple(
        (v["name"], v["schema"]["openAPIV3Schema"])
        for v in doc["spec"]["versions"]
        if v.get("served") and v.get("schema")
    )


# --- 1. pruning ------------------------------------------------------------------------------


def prune(value: Any, schema: Obj, *, root: bool = False) -> None:
    """Drop the fields of ``value`` (in place) that ``schema`` does not know."""
    _unknown(value, schema, "", root=root, drop=True)


def unknown_fields(value: Any, schema: Obj, path: str = "", *, root: bool = False) -> list[str]:
    """The paths (``spec.bogus``, ``spec.items[0].x``) :func:`prune` would drop: what
    ``fieldValidation=Strict`` refuses (apiextensions-apiserver pkg/apiserver
    customresource_handler.go, pruning with ``ReturnPruned``)."""
    return _unknown(value, schema, path, root=root, drop=False)


def _unknown(value: Any, schema: Obj, path: str, *, root: bool, drop: bool) -> list[str]:
    """The one pruning walk: the paths of the fields ``schema`` does not know, each deleted
    from ``value`` too when ``drop``."""
    out: list[str] = []
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                out += _unknown(item, items, f"{path}[{i}]", root=False, drop=drop)
        return out
    if not isinstance(value, dict):
        return out
    props: Obj = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    for key in list(value):
        if root and key in _ROOT_KEPT:
            continue
        sub = props.get(key)
        if sub is None and isinstance(extra, dict):
            sub = extra
        where = _child(path, key)
        if sub is not None:
            out += _unknown(value[key], sub, where, root=False, drop=drop)
        elif not keep_unknown and extra is not True:
            out.append(where)
            if drop:
                del value[key]
    return out


# --- 2. nulls and defaults ------------------------------------------------------------------


def default(value: Any, schema: Obj) -> None:
    """Replace or drop non-nullable nulls, then fill absent fields' defaults (in place)."""
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                default(item, items)
        return
    if not isinstance(value, dict):
        return
    props: Obj = schema.get("properties") or {}
    for key, sub in props.items():
        if key in value and value[key] is None and not sub.get("nullable"):
            if "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            else:
                del value[key]
        if key not in value and "default" in sub:
            value[key] = copy.deepcopy(sub["default"])
        if key in value:
            default(value[key], sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in [k for k in value if k not in props]:
            default(value[key], extra)


# --- 3. validation ---------------------------------------------------------------------------


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _is(value: Any, type_: str) -> bool:
    actual = _json_type(value)
    if type_ == "number":
        return actual in ("integer", "number")
    if type_ == "integer":
        # kube-openapi accepts a JSON number with no fraction as an integer.
        return actual == "integer" or (isinstance(value, float) and value.is_integer())
    return actual == type_


def shown(value: Any) -> str:
    """A bad value as apimachinery's ``field.Error`` prints it: strings quoted (Go ``%q``),
    numbers and booleans bare, anything else as JSON."""
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return orjson.dumps(value).decode() if isinstance(value, dict | list) else str(value)


def _num(value: float) -> str:
    """A schema bound as Go's ``%v`` prints a float64 (10000, not 10000.0)."""
    return str(int(value)) if float(value).is_integer() else str(value)


def validate(value: Any, schema: Obj, path: str = "") -> list[Cause]:
    """Every schema violation of ``value`` (already pruned and defaulted), as causes."""
    where = path or "<nil>"
    name = path or "."
    causes: list[Cause] = []
    if value is None:
        return causes
    # kube-openapi type_validator.go: an int-or-string node has both types.
    if schema.get("x-kubernetes-int-or-string"):
        types = ["integer", "string"]
    else:
        types = [schema["type"]] if schema.get("type") else []
    if types and not any(_is(value, t) for t in types):
        kind = _json_type(value)
        detail = f'{name} in body must be of type {",".join(types)}: "{kind}"'
        return [(where, "FieldValueTypeInvalid", f'Invalid value: "{kind}": {detail}')]
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(
            orjson.dumps(e).decode() if isinstance(e, str) else shown(e) for e in enum
        )
        causes.append(
            (
                where,
                "FieldValueNotSupported",
                f"Unsupported value: {shown(value)}: supported values: {supported}",
            )
        )
    if _is(value, "number") and not isinstance(value, bool):
        causes += _bounds(value, schema, where, name)
    if isinstance(value, str):
        causes += _string(value, schema, where, name)
    if isinstance(value, list):
        top = schema.get("maxItems")
        if top is not None and len(value) > top:
            causes.append(
                (
                    where,
                    "FieldValueTooMany",
                    f"Too many: {len(value)}: must have at most {top} items",
                )
            )
        low = schema.get("minItems")
        if low is not None and len(value) < low:
            causes.append(
                (
                    where,
                    "FieldValueInvalid",
                    f"Invalid value: {len(value)}: {name} in body should have at least {low} items",
                )
            )
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                # kube-openapi names an item ``<path>.<index>`` (slice_validator.go).
                causes += validate(item, items, _child(path, str(i)))
    if isinstance(value, dict):
        for key in schema.get("required") or ():
            if key not in value:
                causes.append((_child(path, key), "FieldValueRequired", "Required value"))
        props: Obj = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if path == "" and key == "metadata":
                continue  # ObjectMeta is validated as every object's metadata is
            if key in props:
                causes += validate(sub, props[key], _child(path, key))
            elif isinstance(extra, dict):
                causes += validate(sub, extra, _child(path, key))
    return causes


def _bounds(value: float, schema: Obj, where: str, name: str) -> list[Cause]:
    causes: list[Cause] = []
    top = schema.get("maximum")
    if top is not None:
        exclusive = bool(schema.get("exclusiveMaximum"))
        if value > top or (exclusive and value == top):
            than = "less than" if exclusive else "less than or equal to"
            causes.append(
                (
                    where,
                    "FieldValueInvalid",
                    f"Invalid value: {shown(value)}: {name} in body should be {than} {_num(top)}",
                )
            )
    low = schema.get("minimum")
    if low is not None:
        exclusive = bool(schema.get("exclusiveMinimum"))
        if value < low or (exclusive and value == low):
            than = "greater than" if exclusive else "greater than or equal to"
            causes.append(
                (
                    where,
                    "FieldValueInvalid",
                    f"Invalid value: {shown(value)}: {name} in body should be {than} {_num(low)}",
                )
            )
    return causes


def _string(value: str, schema: Obj, where: str, name: str) -> list[Cause]:
    causes: list[Cause] = []
    top = schema.get("maxLength")
    if top is not None and len(value) > top:
        # field.TooLong omits the value (apimachinery 1.32+ wording).
        causes.append((where, "FieldValueTooLong", f"Too long: may not be more than {top} bytes"))
    low = schema.get("minLength")
    if low is not None and len(value) < low:
        causes.append(
            (
                where,
                "FieldValueInvalid",
                f"Invalid value: {shown(value)}: {name} in body should be at least {low} "
                "chars long",
            )
        )
    pattern = schema.get("pattern")
    if pattern is not None and re.search(pattern, value) is None:
        causes.append(
            (
                where,
                "FieldValueInvalid",
                f"Invalid value: {shown(value)}: {name} in body should match '{pattern}'",
            )
        )
    if schema.get("format") == "date-time" and not _is_date_time(value):
        causes.append(
            (
                where,
                "FieldValueTypeInvalid",
                f"Invalid value: {shown(value)}: {name} in body must be of type date-time: "
                f"{shown(value)}",
            )
        )
    return causes


def _is_date_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return "T" in text.upper()


# --- 4. CEL ----------------------------------------------------------------------------------


@cache
def _celpy() -> Any:
    """cel-python's module, or None when it is not installed (logged once)."""
    try:
        return importlib.import_module("celpy")
    except ImportError:
        log.warning(
            "kube simulator: cel-python is not installed: the CRDs' x-kubernetes-validations "
            "rules are not checked (a real API server checks them)"
        )
        return None


def has_rules(schema: Any) -> bool:
    """The schema carries ``x-kubernetes-validations`` somewhere."""
    if isinstance(schema, dict):
        if schema.get("x-kubernetes-validations"):
            return True
        return any(has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_rules(v) for v in schema)
    return False


@cache
def _program(rule: str) -> Any:
    celpy = _celpy()
    env = celpy.Environment()
    return env.program(env.compile(rule))


def cel(value: Any, schema: Obj, path: str = "") -> list[Cause]:
    """The failed ``x-kubernetes-validations`` rules of ``value`` (none without cel-python)."""
    celpy = _celpy()
    if celpy is None or value is None:
        return []
    causes: list[Cause] = []
    for rule in schema.get("x-kubernetes-validations") or ():
        text = str(rule.get("rule", "")).strip()
        if not text or "oldSelf" in text:
            continue  # a transition rule needs the old object: skipped, as on a create
        message = str(rule.get("message") or "").strip() or f"failed rule: {text}"
        where = path or "<nil>"
        if rule.get("fieldPath"):
            where = _child(path, str(rule["fieldPath"]).lstrip("."))
        shown_value = "" if isinstance(value, dict | list) else f"{shown(value)}: "
        try:
            ok = _program(text).evaluate({"self": celpy.json_to_cel(value)})
        except Exception as exc:  # noqa: BLE001 - any evaluation error is the rule's failure
            causes.append(
                (
                    where,
                    "FieldValueInvalid",
                    f"Invalid value: {shown_value}{exc} evaluating rule: {text}",
                )
            )
            continue
        # A rule must evaluate to a boolean (celpy's BoolType is not a Python bool).
        if not isinstance(ok, bool | celpy.celtypes.BoolType) or not bool(ok):
            causes.append((where, "FieldValueInvalid", f"Invalid value: {shown_value}{message}"))
    if isinstance(value, dict):
        props: Obj = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            child = props.get(key, extra if isinstance(extra, dict) else None)
            if isinstance(child, dict) and has_rules(child):
                causes += cel(sub, child, _child(path, key))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict) and has_rules(items):
            for i, item in enumerate(value):
                causes += cel(item, items, _child(path, str(i)))
    return causes


# --- all together ----------------------------------------------------------------------------


def _at(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict):
            cur = cur.get(part)
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


def admit(obj: Obj, schema: Obj, old: Obj | None = None) -> list[Cause]:
    """Prune and default ``obj`` in place, then every cause it fails (steps 1–5)."""
    prune(obj, schema, root=True)
    default(obj, schema)
    causes = validate(obj, schema)
    if old is not None:
        # Ratcheting: an unchanged field's old errors are not the update's fault.
        causes = [c for c in causes if c[0] == "<nil>" or _at(obj, c[0]) != _at(old, c[0])]
    if has_rules(schema):
        if any(t in BLOCKING for _, t, _ in causes):
            causes.append(NOT_CHECKED)
        else:
            failed = cel(obj, schema)
            if old is not None:
                failed = [c for c in failed if _at(obj, c[0]) != _at(old, c[0])]
            causes += failed
    return causes

"""The OpenAPI documents of :class:`~slurmbridge.devtools.sim.kube.KubeSim`: ``/openapi/v2``,
the ``/openapi/v3`` discovery and one v3 document per group version.

kubectl reads them before it writes: ``kubectl apply|create|replace`` ask whether the server
validates fields (k8s.io/cli-runtime pkg/resource/query_param_verifier_v3.go: the PATCH
operation of the kind's path, tagged ``x-kubernetes-group-version-kind``, has query parameter
``fieldValidation``) and then send ``fieldValidation=Strict`` instead of validating locally.

Shapes follow the real server: paths as the apiserver installs them
(staging/src/k8s.io/apiserver/pkg/endpoints/installer.go: a collection path with list, create
and deletecollection, an item path with read, replace, patch and delete, ``/status`` and
``/scale`` subresources), operation ids and ``x-kubernetes-action`` as installer.go names them,
schema names ``io.k8s.api.<group>.<version>.<Kind>`` for built-in kinds and the reversed
group for custom resources (apiextensions-apiserver pkg/controller/openapi/builder), the v3
discovery as kube-openapi pkg/handler3 (``serverRelativeURL`` with ``hash`` = upper-case hex
SHA-512 of the document).

What the simulator does not have: the built-in kinds' field schemas (their components are
``type: object`` with the kind's ``x-kubernetes-group-version-kind``), so client-side schema
validation of a built-in kind accepts any field. Custom resources carry their CRD's
``openAPIV3Schema``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import orjson

if TYPE_CHECKING:
    from slurmbridge.devtools.sim.kube import ResourceSpec

Obj = dict[str, Any]

#: kube-openapi's info block for the apiserver (pkg/controlplane: "Kubernetes", the version).
_INFO: Final = {"title": "Kubernetes", "version": "v1.33.0"}

_SCALE_REF: Final = "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"
_QUERY: Final = {
    "dryRun": "When present, indicates that modifications should not be persisted.",
    "fieldManager": "fieldManager is a name associated with the actor or entity that is "
    "making these changes.",
    "fieldValidation": "fieldValidation instructs the server on how to handle objects in the "
    "request containing unknown or duplicate fields: Ignore, Warn or Strict.",
    "pretty": "If 'true', then the output is pretty printed.",
}


def _param(name: str, where: str = "query") -> Obj:
    schema: Obj = {"type": "string", "uniqueItems": True}
    return {
        "name": name,
        "in": where,
        "description": _QUERY.get(name, name),
        "schema": schema,
        **({"required": True} if where == "path" else {}),
    }


def schema_name(spec: ResourceSpec, version: str) -> str:
    """The component name of ``spec``'s kind at ``version``: ``io.k8s.api.core.v1.Pod``,
    ``io.k8s.api.batch.v1.Job``, ``net.slurm.slinky.v1beta1.NodeSet`` (a custom resource's
    group reversed, apiextensions-apiserver's builder)."""
    if spec.custom:
        return ".".join(reversed(spec.group.split("."))) + f".{version}.{spec.kind}"
    group = spec.group.split(".")[0] if spec.group else "core"
    return f"io.k8s.api.{group}.{version}.{spec.kind}"


def _gvk(spec: ResourceSpec, version: str) -> Obj:
    return {"group": spec.group, "version": version, "kind": spec.kind}


def _operation(
    spec: ResourceSpec, version: str, action: str, op_id: str, params: Iterable[str], ref: str
) -> Obj:
    op: Obj = {
        "description": f"{action} {spec.kind}",
        "operationId": op_id,
        "parameters": [_param(p) for p in params],
        "responses": {
            "200": {
                "description": "OK",
                "content": {"application/json": {"schema": {"$ref": ref}}},
            },
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(spec, version),
    }
    if action in ("post", "put", "patch"):
        # Strategic merge patch is accepted for built-in kinds but not advertised: kubectl
        # apply computes one from the advertised schema (k8s.io/kubectl pkg/cmd/apply
        # patcher.go), and the simulator has no field schemas for built-in kinds; without it
        # kubectl takes the patch metadata from its own compiled-in types, as it does for an
        # apiserver without OpenAPI v3.
        media = (
            [
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]
            if action == "patch"
            else ["*/*"]
        )
        op["requestBody"] = {
            "content": {m: {"schema": {"$ref": ref}} for m in media},
            "required": True,
        }
    return op


def _camel(spec: ResourceSpec, version: str) -> str:
    """installer.go's operation id middle part: ``CoreV1``, ``BatchV1``,
    ``SlinkySlurmNetV1beta1``."""
    group = spec.group.removesuffix(".k8s.io") if spec.group else "core"
    words = [w for part in group.split(".") for w in part.split("-")]
    return "".join(w[:1].upper() + w[1:] for w in words) + version[:1].upper() + version[1:]


def group_version_document(specs: Iterable[ResourceSpec], group: str, version: str) -> Obj:
    """The v3 document of ``group``/``version`` (``""`` for the core group)."""
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    paths: Obj = {}
    schemas: Obj = {}
    for spec in specs:
        name = schema_name(spec, version)
        ref = f"#/components/schemas/{name}"
        component: Obj = dict(spec.schemas.get(version) or {"type": "object"})
        component["x-kubernetes-group-version-kind"] = [_gvk(spec, version)]
        schemas[name] = component
        schemas[f"{name}List"] = {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": ref}}},
            "x-kubernetes-group-version-kind": [
                {"group": spec.group, "version": version, "kind": spec.list_kind}
            ],
        }
        middle = _camel(spec, version)
        scope = "Namespaced" if spec.namespaced else ""
        base = (
            f"{prefix}/namespaces/{{namespace}}/{spec.plural}"
            if spec.namespaced
            else f"{prefix}/{spec.plural}"
        )
        common = [_param("pretty")] + ([_param("namespace", "path")] if spec.namespaced else [])
        write = ("dryRun", "fieldManager", "fieldValidation")
        paths[base] = {
            "get": _operation(
                spec, version, "list", f"list{middle}{scope}{spec.kind}", (), f"{ref}List"
            ),
            "post": _operation(
                spec, version, "post", f"create{middle}{scope}{spec.kind}", write, ref
            ),
            "delete": _operation(
                spec,
                version,
                "deletecollection",
                f"deletecollection{middle}{scope}{spec.kind}",
                ("dryRun",),
                ref,
            ),
            "parameters": common,
        }
        item_common = [_param("name", "path"), *common]
        subs: list[tuple[str, str]] = [("", "")]
        if spec.status:
            subs.append(("/status", "Status"))
        if spec.scale is not None:
            subs.append(("/scale", "Scale"))
        for sub, suffix in subs:
            target = ref if sub != "/scale" else _SCALE_REF
            ops: Obj = {
                "get": _operation(
                    spec, version, "get", f"read{middle}{scope}{spec.kind}{suffix}", (), target
                ),
                "put": _operation(
                    spec,
                    version,
                    "put",
                    f"replace{middle}{scope}{spec.kind}{suffix}",
                    write,
                    target,
                ),
                "patch": _operation(
                    spec,
                    version,
                    "patch",
                    f"patch{middle}{scope}{spec.kind}{suffix}",
                    (*write, "force"),
                    target,
                ),
                "parameters": item_common,
            }
            if not sub:
                ops["delete"] = _operation(
                    spec, version, "delete", f"delete{middle}{scope}{spec.kind}", ("dryRun",), ref
                )
            paths[f"{base}/{{name}}{sub}"] = ops
        if spec.scale is not None:
            schemas["io.k8s.api.autoscaling.v1.Scale"] = {
                "type": "object",
                "x-kubernetes-group-version-kind": [
                    {"group": "autoscaling", "version": "v1", "kind": "Scale"}
                ],
            }
    return {"openapi": "3.0.0", "info": _INFO, "paths": paths, "components": {"schemas": schemas}}


def etag(document: Obj) -> str:
    """kube-openapi handler3 ``computeETag``: upper-case hex SHA-512 of the JSON bytes."""
    return hashlib.sha512(orjson.dumps(document)).hexdigest().upper()


def v3_discovery(documents: dict[str, Obj]) -> Obj:
    """``/openapi/v3``: each ``api/v1`` / ``apis/<group>/<version>`` with its hashed URL."""
    return {
        "paths": {
            gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={etag(doc)}"}
            for gv, doc in sorted(documents.items())
        }
    }


def v2_document(documents: dict[str, Obj]) -> Obj:
    """``/openapi/v2``: the same paths and kinds as one Swagger 2.0 document (``definitions``
    instead of ``components.schemas``, ``$ref`` to ``#/definitions/``)."""
    paths: Obj = {}
    definitions: Obj = {}
    for doc in documents.values():
        text = orjson.dumps(doc).replace(b"#/components/schemas/", b"#/definitions/")
        converted = orjson.loads(text)
        for path, item in converted["paths"].items():
            out: Obj = {}
            for method, value in item.items():
                if method == "parameters":
                    out[method] = [_v2_param(p) for p in value]
                    continue
                op = dict(value)
                body = op.pop("requestBody", None)
                op["parameters"] = [_v2_param(p) for p in op["parameters"]]
                if body is not None:
                    media = next(iter(body["content"].values()))
                    op["parameters"].append(
                        {"name": "body", "in": "body", "required": True, "schema": media["schema"]}
                    )
                    op["consumes"] = list(body["content"])
                op["produces"] = ["application/json"]
                op["responses"] = {
                    code: {
                        "description": r["description"],
                        **(
                            {"schema": r["content"]["application/json"]["schema"]}
                            if "content" in r
                            else {}
                        ),
                    }
                    for code, r in op["responses"].items()
                }
                out[method] = op
            paths[path] = out
        definitions.update(converted["components"]["schemas"])
    return {"swagger": "2.0", "info": _INFO, "paths": paths, "definitions": definitions}


def _v2_param(param: Obj) -> Obj:
    out = {k: v for k, v in param.items() if k != "schema"}
    out["type"] = "string"
    out["uniqueItems"] = True
    return out

"""Dynamic Resource Allocation from Slurm's allocation (pure; Slinky slurm-bridge
``internal/nodeinfo`` and ``internal/scheduler/plugins/slurmbridge/dra.go``).

Slurm decides which GPUs and cores a pod's job holds on a node; this module names the DRA
devices of those very GPUs and CPUs, so that the pod's ResourceClaim allocation
(``status.allocation.devices.results[]``: request, driver, pool, device) is Slurm's choice.

**What a pod asks for.** DRA extended resources in its containers —
``deviceclass.resource.kubernetes.io/<class>`` (:data:`DEVICE_CLASS_PREFIX`) — and/or the
device requests (``spec.devices.requests[].exactly.deviceClassName``) of the ResourceClaims
its ``spec.resourceClaims`` name. A class is what its DeviceClass's selector says
(:func:`class_kind`, :mod:`reconcilers._devprofile`; Slinky slurm-bridge 1.3
``internal/dra``): any class whose one CEL selector is a device profile's is that profile's
CPU or GPU class, whatever its name, and a Slurm GRES typed with the profile's name maps back
to devices through the node's applied inventory. A class whose DeviceClass matches no profile,
or that has none in the log, keeps the class-name rule of :data:`SUPPORTED` (Slinky
``nodeinfo.go`` ``supportedDRADeviceClasses``):

============== ======= ====================================================================
class          kind    devices, from the node's ResourceSlices of driver = the class name
============== ======= ====================================================================
dra.cpu        CPU     one device per CPU; attributes ``dra.cpu/cpuID``, ``dra.cpu/coreID``,
                       ``dra.cpu/socketID``, ``dra.cpu/coreType`` (Slinky ``cpuinfo.go``)
gpu.nvidia.com GPU     device ``gpu-<index>``: the index is the name's number (NVIDIA
                       k8s-dra-driver-gpu; Slinky ``gpuinfo.go``)
gpu.example.com GPU    the device's integer attribute ``index`` (dra-example-driver)
============== ======= ====================================================================

**GPU rule** (Slinky ``nodeinfo.GetDeviceRequestAllocationResult``): the job's GPU indices on
the node — its ``gres_detail`` entries named ``gpu`` (only those typed with the class name when
there are such, Slinky's own GRES type; else every ``gpu`` entry: slurmbridge asks Slurm for
untyped ``gres/gpu=N``, see ``_pods.translate``) — are looked up among the devices of the
class's driver on the node; a request of ``count`` devices takes the first ``count`` indices
not already held by another claim on the node (Slinky ``subsetGRESResources`` takes the first
``count``; the "not held" part lets several pods of one job share a node).

**CPU rule** (Slinky ``cpumap.go``): the node's ``dra.cpu`` devices sorted by socket, core and
CPU id form Slurm's abstract cores (distinct (socket, core) pairs in that order; efficiency
cores, ``coreType`` 3, are not enumerated by Slurm); the job's abstract cores on the node
(``job_resources``) give their CPUs (all hyperthread siblings), sorted by CPU id; a request
of ``count`` takes the first ``count`` not held by another claim. Slinky gives the claim every
CPU of the job's cores; here the claim gets what the pod asked for, so two pods of one job on
one node do not share CPUs.

Errors (:class:`DraError`) name the field and the reason; placement reports them on the pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import msgspec

from reconcilers import _devprofile
from schemas.actions import ExtendedResourceMapping
from schemas.dra import (
    CPU_CLASS,
    DEVICE_CLASS_PREFIX,
    EXAMPLE_CLASS,
    EXTENDED_CLAIM_ANNOTATION,
    NVIDIA_CLASS,
    POD_CLAIM_ANNOTATION,
    SUPPORTED,
    device_class_of,
)
from schemas.events import (
    AllocatedDevice,
    ClaimRequest,
    KubeDeviceClass,
    KubePod,
    KubeResourceClaim,
    KubeResourceSlice,
    NodeAlloc,
)

#: The CPU driver's device attributes (Slinky ``cpuinfo.go``).
CPU_ID: Final = "dra.cpu/cpuID"
CORE_ID: Final = "dra.cpu/coreID"
SOCKET_ID: Final = "dra.cpu/socketID"
CORE_TYPE: Final = "dra.cpu/coreType"
#: ``coreType`` of an efficiency core, which Slurm does not enumerate (Slinky ``cpuinfo.go``).
EFFICIENCY_CORE: Final = 3
#: The example driver's index attribute (Slinky ``gpuinfo.go``).
INDEX: Final = "index"
#: Request names of a claim made for extended resources (Slinky ``nodeinfo.GetDeviceRequests``:
#: ``cpu`` for the CPU class, the GRES name ``gpu`` for a GPU class).
CPU_REQUEST: Final = "cpu"
GPU_REQUEST: Final = "gpu"

__all__ = [
    "CPU_CLASS",
    "DEVICE_CLASS_PREFIX",
    "EXAMPLE_CLASS",
    "EXTENDED_CLAIM_ANNOTATION",
    "NVIDIA_CLASS",
    "POD_CLAIM_ANNOTATION",
    "SUPPORTED",
    "DraError",
    "device_class_of",
]

DeviceId = tuple[str, str, str]
"""A device: (driver, pool, device name)."""


class DraError(ValueError):
    """The pod's DRA request cannot be met from Slurm's allocation; ``field`` names what."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


Classes = Mapping[str, KubeDeviceClass]
"""DeviceClass name → its observation (the log's DeviceClasses)."""
NO_CLASSES: Final[Classes] = {}


class ClassKind(msgspec.Struct, frozen=True, kw_only=True):
    """What a device class stands for: ``kind`` (``cpu``, ``gpu``, ``nic``), the ``driver``
    of its devices and its device ``profile`` (None: the class-name rule of
    :data:`SUPPORTED`, for a class whose DeviceClass matches no profile or is not in the log
    — Slinky keeps that driver-specific path for such classes, ``deviceprofile.go``)."""

    kind: str
    driver: str
    profile: _devprofile.DeviceProfile | None = None


def class_kind(device_class: str, classes: Classes = NO_CLASSES) -> ClassKind:
    """Resolve a device class: by its DeviceClass's selector first (any class name works:
    :func:`reconcilers._devprofile.match_device_class`), else by the class name.

    Raises:
        DraError: neither its DeviceClass nor its name names a supported device (the reason
            says why the DeviceClass matched no profile).
    """
    resolved = _devprofile.resolve(device_class, classes)
    if isinstance(resolved, _devprofile.DeviceProfile):
        return ClassKind(kind=resolved.kind, driver=resolved.driver, profile=resolved)
    legacy = SUPPORTED.get(device_class)
    if legacy is not None:
        return ClassKind(kind=legacy, driver=device_class)
    why = str(resolved) if resolved is not None else f"no DeviceClass {device_class!r}"
    raise DraError(
        "deviceClassName",
        f"{device_class or 'no device class'!r} is not supported: {why} (supported: the device "
        f"profiles {', '.join(p.name for p in _devprofile.PROFILES)} by their selector, or "
        f"the classes {_supported_text()})",
    )


def _kind_or_none(device_class: str, classes: Classes) -> str | None:
    try:
        return class_kind(device_class, classes).kind
    except DraError:
        return None


def is_gpu_class(device_class: str, classes: Classes = NO_CLASSES) -> bool:
    """A supported GPU device class (by its DeviceClass's profile, else by name)."""
    return _kind_or_none(device_class, classes) == "gpu"


def _supported_text() -> str:
    return ", ".join(sorted(SUPPORTED))


# --- what a pod asks for -----------------------------------------------------------------------


def extended_counts(pod: KubePod) -> dict[str, int]:
    """Devices per class of the pod's DRA extended resources (the containers' counts summed;
    the webhook allows one container per class, as Slinky does)."""
    out: dict[str, int] = {}
    for r in pod.dra_requests:
        if r.count > 0:
            out[r.device_class] = out.get(r.device_class, 0) + r.count
    return out


def needs_dra(pod: KubePod) -> bool:
    """The pod asks for DRA devices (extended resources or ResourceClaims)."""
    return bool(pod.claims) or any(r.count > 0 for r in pod.dra_requests)


def check_extended(pod: KubePod, classes: Classes = NO_CLASSES) -> None:
    """The pod-level rules on its DRA extended resources (Slinky admission and
    ``validateDeviceClassRequests``).

    Raises:
        DraError: an unsupported class; a class asked for by two containers; more than one
            GPU class (slurmbridge asks Slurm for one kind of GPU per job).
    """
    by_class: dict[str, str] = {}
    for r in pod.dra_requests:
        field = f"spec.containers[{r.container}].resources[{r.resource}]"
        try:
            kind = class_kind(r.device_class, classes).kind
        except DraError as exc:
            raise DraError(field, f"device class {exc.reason}") from None
        if kind not in ("cpu", "gpu"):
            raise DraError(
                field,
                f"device class {r.device_class!r} selects {kind} devices, which slurmbridge "
                "does not ask Slurm for yet (CPUs and GPUs only)",
            )
        if r.count <= 0:
            continue
        other = by_class.get(r.device_class)
        # Slinky (validateDeviceClassRequests) lets several containers share the CPU class.
        if other is not None and other != r.container and kind != "cpu":
            raise DraError(
                field,
                f"device class {r.device_class!r} is requested by containers {other!r} and "
                f"{r.container!r}; one container per device class is supported",
            )
        by_class[r.device_class] = r.container
    gpu = sorted(c for c in by_class if is_gpu_class(c, classes))
    if len(gpu) > 1:
        raise DraError(
            "spec.containers[*].resources",
            f"GPUs of several device classes ({', '.join(gpu)}): one GPU class per pod",
        )


def extended_claim(
    pod: KubePod, classes: Classes = NO_CLASSES
) -> tuple[tuple[ClaimRequest, ...], tuple[ExtendedResourceMapping, ...]]:
    """The requests of the claim for the pod's extended resources and the pod's
    ``extendedResourceClaimStatus.requestMappings`` (Slinky ``createRequestsAndMappings`` /
    ``createContainerRequestMappings``): one ExactCount request per class, named
    :data:`CPU_REQUEST` or :data:`GPU_REQUEST`; one mapping per container and resource, in
    container order (init containers first), resources sorted."""
    counts = extended_counts(pod)
    requests = tuple(
        ClaimRequest(
            name=CPU_REQUEST if _kind_or_none(c, classes) == "cpu" else GPU_REQUEST,
            device_class=c,
            count=n,
        )
        for c, n in sorted(counts.items())
    )
    names = {r.device_class: r.name for r in requests}
    mappings = []
    seen = set()
    for r in pod.dra_requests:
        key = (r.container, r.resource)
        if r.count > 0 and r.device_class in names and key not in seen:
            seen.add(key)
            mappings.append(
                ExtendedResourceMapping(
                    container=r.container, request=names[r.device_class], resource=r.resource
                )
            )
    return requests, tuple(mappings)


def gpus_asked(
    pod: KubePod, claims: Iterable[KubeResourceClaim] = (), classes: Classes = NO_CLASSES
) -> int:
    """GPUs the pod asks for through DRA: its GPU-class extended resources and the GPU
    requests of ``claims`` (the claims its ``spec.resourceClaims`` name)."""
    n = sum(c for cls, c in extended_counts(pod).items() if is_gpu_class(cls, classes))
    for claim in claims:
        n += sum(r.count for r in claim.requests if is_gpu_class(r.device_class, classes))
    return n


def cpus_asked(pod: KubePod, classes: Classes = NO_CLASSES) -> int:
    """CPUs the pod asks for through the extended resource of a CPU class (``dra.cpu``, or
    any class whose DeviceClass selects the ``cpu`` profile; Slinky: the quantity is the
    Slurm CPU count)."""
    return sum(c for cls, c in extended_counts(pod).items() if _kind_or_none(cls, classes) == "cpu")


# --- what the node has -----------------------------------------------------------------------


def _gpu_index(driver: str, name: str, attributes: dict[str, int | bool | str]) -> int:
    """A GPU device's index (Slinky ``gpuinfo.go``), -1 when it has none."""
    if driver == NVIDIA_CLASS:
        digits = name.removeprefix("gpu-")
        return int(digits) if digits != name and digits.isdigit() else -1
    value = attributes.get(INDEX)
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def gpu_map(slices: Iterable[KubeResourceSlice], driver: str) -> dict[int, DeviceId]:
    """GPU index → device, over the node's slices of ``driver`` (the class-name rule)."""
    out: dict[int, DeviceId] = {}
    for s in slices:
        if s.driver != driver:
            continue
        for d in s.devices:
            index = _gpu_index(driver, d.name, d.attributes)
            if index >= 0:
                out[index] = (s.driver, s.pool, d.name)
    return out


def _int_attr(attributes: dict[str, int | bool | str], name: str, default: int) -> int:
    value = attributes.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def cpu_cores(slices: Iterable[KubeResourceSlice]) -> list[list[tuple[int, DeviceId]]]:
    """Slurm's abstract cores of the node, in order: each the (CPU id, device) of its CPUs,
    sorted by CPU id (Slinky ``cpumap.NewCPUMap``)."""
    cpus = []
    for s in slices:
        if s.driver != CPU_CLASS:
            continue
        for d in s.devices:
            a = d.attributes
            cpus.append(
                (
                    _int_attr(a, SOCKET_ID, -1),
                    _int_attr(a, CORE_ID, -1),
                    _int_attr(a, CPU_ID, -1),
                    _int_attr(a, CORE_TYPE, 0),
                    (s.driver, s.pool, d.name),
                )
            )
    cpus.sort(key=lambda c: (c[0], c[1], c[2]))
    cores: dict[tuple[int, int], list[tuple[int, DeviceId]]] = {}
    for socket, core, cpu, core_type, dev in cpus:
        if core_type == EFFICIENCY_CORE:
            continue
        cores.setdefault((socket, core), []).append((cpu, dev))
    return list(cores.values())


def slurm_gpu_indices(alloc: NodeAlloc, device_class: str, driver: str = "") -> tuple[int, ...]:
    """The GPU indices the job holds on the node (module docstring, GPU rule): the ``gpu``
    entries typed with the class or driver name when there are such, else all of them —
    never an entry typed with a device profile's name, which only that profile's devices
    stand for."""
    gpus = [g for g in alloc.gres if g.name == "gpu" and g.type not in _devprofile.BY_NAME]
    typed = [g for g in gpus if g.type in (device_class, driver or device_class)]
    return tuple(sorted({i for g in typed or gpus for i in g.indices}))


def profile_indices(alloc: NodeAlloc, profile: _devprofile.DeviceProfile) -> tuple[int, ...]:
    """The indices of the job's GRES typed with ``profile``'s name, in Slurm's order
    (Slinky ``allocateIndexedGRESProfiles``).

    Raises:
        DraError: an entry of that type under another GRES name (Slinky
            ``MatchIndexedGRES``: the profile owns the type).
    """
    out: list[int] = []
    for g in alloc.gres:
        if g.type != profile.name:
            continue
        if g.name != profile.gres_name:
            raise DraError(
                "gres_detail",
                f"Slurm GRES type {g.type!r} uses name {g.name!r}, expected "
                f"{profile.gres_name!r} for device profile {profile.name!r}",
            )
        out.extend(g.indices)
    return tuple(out)


# --- the mapping -------------------------------------------------------------------------------


def devices_for(
    requests: Sequence[ClaimRequest],
    alloc: NodeAlloc | None,
    slices: Sequence[KubeResourceSlice],
    *,
    taken: frozenset[DeviceId] = frozenset(),
    field: str = "spec.devices.requests",
    classes: Classes = NO_CLASSES,
    applied: str = "",
) -> tuple[AllocatedDevice, ...]:
    """The devices for a claim's ``requests`` from the job's allocation ``alloc`` on one
    node and that node's ``slices``, skipping devices in ``taken`` (held by other claims on
    the node). ``applied``: the Slurm node's ``Extra`` when it holds slurmbridge's applied
    device inventory (a profile-typed GRES maps back through it). Rules: module docstring.

    Raises:
        DraError: an unsupported class or allocation mode; no allocation reported by Slurm
            for the node; a Slurm GPU index or core the node's slices lack; fewer free
            devices than a request's count. ``field`` prefixes the request's path.
    """
    out: list[AllocatedDevice] = []
    used = set(taken)
    for i, req in enumerate(requests):
        where = f"{field}[{i}]"
        try:
            ck = class_kind(req.device_class, classes)
        except DraError as exc:
            raise DraError(f"{where}.exactly.deviceClassName", exc.reason) from None
        kind = ck.kind
        if req.mode != "ExactCount":
            raise DraError(
                f"{where}.exactly.allocationMode",
                f"{req.mode!r}: only ExactCount (Slurm allocates a count)",
            )
        if alloc is None:
            raise DraError(
                where, "Slurm reported no allocation for the node (gres_detail, job_resources)"
            )
        if kind == "cpu":
            candidates = _cpu_candidates(alloc, slices, where)
            what = "CPUs"
        elif ck.profile is not None and (indices := profile_indices(alloc, ck.profile)):
            candidates = _profile_candidates(ck.profile, indices, alloc, slices, where, applied)
            what = f"{kind.upper()}s"
        else:
            candidates = _gpu_candidates(req, ck.driver, alloc, slices, where)
            what = "GPUs"
        free = [d for d in candidates if d not in used]
        if len(free) < req.count:
            raise DraError(
                f"{where}.exactly.count",
                f"{req.count} {what} of class {req.device_class} asked for, but the Slurm job "
                f"holds {len(candidates)} on node {alloc.node}, {len(free)} of them free",
            )
        for driver, pool, device in free[: req.count]:
            used.add((driver, pool, device))
            out.append(AllocatedDevice(request=req.name, driver=driver, pool=pool, device=device))
    return tuple(out)


def _gpu_candidates(
    req: ClaimRequest,
    driver: str,
    alloc: NodeAlloc,
    slices: Sequence[KubeResourceSlice],
    where: str,
) -> list[DeviceId]:
    devices = gpu_map(slices, driver)
    out = []
    for index in slurm_gpu_indices(alloc, req.device_class, driver):
        dev = devices.get(index)
        if dev is None:
            raise DraError(
                where,
                f"GPU index {index} of the Slurm allocation on node {alloc.node} has no "
                f"device of driver {driver} in the node's ResourceSlices",
            )
        out.append(dev)
    return out


def _profile_candidates(
    profile: _devprofile.DeviceProfile,
    indices: Sequence[int],
    alloc: NodeAlloc,
    slices: Sequence[KubeResourceSlice],
    where: str,
    extra: str = "",
) -> list[DeviceId]:
    """Slurm's indices of a profile-typed GRES mapped back to the exact devices through the
    node's applied inventory — the Slurm node's ``Extra`` (``extra``) when slurmbridge wrote
    it there, else the one its current ResourceSlices give
    (:func:`reconcilers._devprofile.applied_of`; Slinky ``indexedGRESAllocationResults``)."""
    node = next((s.node for s in slices if s.node), "")
    try:
        if extra:
            applied = _devprofile.decode_applied(extra)
        else:
            applied = _devprofile.applied_of(_devprofile.node_inventory(node, slices))
        return list(applied.devices(profile.name, indices))
    except _devprofile.ProfileError as exc:
        raise DraError(where, f"node {alloc.node}: {exc}") from None


def _cpu_candidates(
    alloc: NodeAlloc, slices: Sequence[KubeResourceSlice], where: str
) -> list[DeviceId]:
    cores = cpu_cores(slices)
    cpus: list[tuple[int, DeviceId]] = []
    for core in alloc.cores:
        if core >= len(cores):
            raise DraError(
                where,
                f"core {core} of the Slurm allocation on node {alloc.node} has no CPU of "
                f"driver {CPU_CLASS} in the node's ResourceSlices ({len(cores)} cores)",
            )
        cpus.extend(cores[core])
    return [dev for _, dev in sorted(cpus)]


def taken_on(
    node: str, claims: Iterable[KubeResourceClaim], *, but: str = ""
) -> frozenset[DeviceId]:
    """Devices allocated on Kubernetes node ``node`` to claims other than ``but`` (a key)."""
    return frozenset(
        (r.driver, r.pool, r.device)
        for c in claims
        if c.allocated and c.node == node and c.key != but and not c.deleted
        for r in c.results
    )

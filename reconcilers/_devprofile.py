"""DRA device profiles: what a DeviceClass *is*, whatever its name (pure; Slinky slurm-bridge
1.3 ``internal/dra/registry.go``, ``inventory.go``, ``gres.go`` and
``internal/scheduler/plugins/slurmbridge/deviceprofile.go``).

**Profiles.** slurmbridge knows four kinds of device, each a *profile* with a stable name, the
DRA driver that publishes its devices, the exact CEL selector of that driver's upstream
DeviceClass, and how Slurm counts it (Slinky ``registry.go`` ``DefaultRegistry``):

============ =============== ============================================== ===============
profile      driver          devices it covers                              in Slurm
============ =============== ============================================== ===============
cpu          dra.cpu         every device (one per CPU)                     core bitmap
gpu-example  gpu.example.com every device                                   ``gpu:gpu-example``
gpu-nvidia   gpu.nvidia.com  attribute ``type`` is ``gpu``: whole GPUs only ``gpu:gpu-nvidia``
                             (MIG slices, ``type`` ``mig``, are excluded)
dranet-rdma  dra.net         attributes ``pciAddress`` present and ``rdma`` ``nic:dranet-rdma``
                             true (DRANET v1.4)
============ =============== ============================================== ===============

**A DeviceClass matches a profile** (:func:`match_device_class`, Slinky ``Registry.
MatchDeviceClass``) when it has no ``config``, exactly one selector, that selector is CEL, and
its expression is *byte for byte* the profile's selector (Slinky ``LookupBySelector``: "matching
is deliberately byte-for-byte") — so no CEL evaluator is needed, and any class *name* works.
Within a profile, a device is classified by the selector's meaning, written out here as a
predicate per profile (:func:`device_matches`); a device two profiles claim is refused (Slinky
``OverlappingDeviceProfilesError``).

**The node inventory** (:func:`node_inventory`, Slinky ``BuildNodeInventory``): per
``(driver, pool)`` of a driver some profile covers, only the highest ``pool_generation``
counts; two slices of that generation disagreeing on ``slice_count`` are refused
(inconsistent); fewer slices than ``slice_count`` are refused when the pool publishes devices
for the node (a driver mid-publish elsewhere does not fail this node); each profile's devices
are sorted by (driver, pool, device name).

**Slurm's view** (:func:`gres_config`, Slinky ``GRESInventory.SlurmConfig`` and slurmcontrol
``buildNodeGRESConfig``): every indexed-GRES profile with devices becomes
``<gres>:<profile>:<n>`` in ``Gres=`` (comma-joined, profiles in name order) and one
``GresConf`` record per device, ``count=1,name=<gres>,type=<profile>,file=/dra/<driver>/<pool>/
<device>``, records joined by ``+`` — so Slurm's GRES index ``i`` of a type is the ``i``-th
device. The *applied* inventory (:func:`gres_config`, Slinky ``EncodeAppliedInventory``,
format version 2) is written to the Slurm node's ``extra`` as
``slurm-bridge.dra-gres-map={"v":2,"profiles":{<profile>:{"firstIndex":i,"devices":[paths]}}}``:
Slurm numbers GRES of one *name* across its types, so ``firstIndex`` is where the profile's
range starts; a bind maps Slurm's indices back to the exact devices through it
(:meth:`Applied.devices`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

import msgspec

from schemas.events import KubeDeviceClass, KubeResourceSlice, SliceDevice

#: Prefix of the Slurm node ``extra`` value slurmbridge owns (Slinky ``gres.go``
#: ``AppliedInventoryExtraPrefix``).
APPLIED_PREFIX: Final = "slurm-bridge.dra-gres-map="
#: Version of the applied-inventory format written (Slinky ``appliedInventoryVersion``).
APPLIED_VERSION: Final = 2
#: Prefix of a device's ``file=`` path in ``GresConf`` (Slinky ``devicePathPrefix``).
DEVICE_PATH_PREFIX: Final = "/dra/"

Backend = Literal["core-bitmap", "indexed-gres"]
DeviceId = tuple[str, str, str]
"""A device: (driver, pool, device name)."""


class ProfileError(ValueError):
    """A DeviceClass, inventory or applied inventory slurmbridge cannot use; the message
    names the object and the reason."""


class DeviceProfile(msgspec.Struct, frozen=True, kw_only=True):
    """One built-in profile: ``name`` (also the Slurm GRES type), ``driver``, the canonical
    CEL ``selector``, the ``backend`` and, for ``indexed-gres``, the Slurm GRES name."""

    name: str
    driver: str
    selector: str
    backend: Backend
    gres_name: str = ""

    @property
    def kind(self) -> str:
        """``cpu`` for the core bitmap, else the GRES name (``gpu``, ``nic``)."""
        return "cpu" if self.backend == "core-bitmap" else self.gres_name


CPU: Final = DeviceProfile(
    name="cpu", driver="dra.cpu", selector='device.driver == "dra.cpu"', backend="core-bitmap"
)
GPU_EXAMPLE: Final = DeviceProfile(
    name="gpu-example",
    driver="gpu.example.com",
    selector="device.driver == 'gpu.example.com'",
    backend="indexed-gres",
    gres_name="gpu",
)
GPU_NVIDIA: Final = DeviceProfile(
    name="gpu-nvidia",
    driver="gpu.nvidia.com",
    selector=(
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    ),
    backend="indexed-gres",
    gres_name="gpu",
)
DRANET_RDMA: Final = DeviceProfile(
    name="dranet-rdma",
    driver="dra.net",
    selector=(
        "device.driver == 'dra.net' && "
        "has(device.attributes['dra.net'].pciAddress) && "
        "has(device.attributes['dra.net'].rdma) && "
        "device.attributes['dra.net'].rdma == true"
    ),
    backend="indexed-gres",
    gres_name="nic",
)
#: The built-in profiles in name order (Slinky ``DefaultRegistry``).
PROFILES: Final[tuple[DeviceProfile, ...]] = tuple(
    sorted((CPU, GPU_EXAMPLE, GPU_NVIDIA, DRANET_RDMA), key=lambda p: p.name)
)
BY_NAME: Final[dict[str, DeviceProfile]] = {p.name: p for p in PROFILES}
BY_SELECTOR: Final[dict[str, DeviceProfile]] = {p.selector: p for p in PROFILES}


def _attr(device: SliceDevice, driver: str, domain: str, name: str) -> int | bool | str | None:
    """``device.attributes['<domain>'].<name>``: the qualified key, or the bare key when the
    domain is the driver's own (resource.k8s.io/v1: an unqualified attribute name is in the
    driver's domain)."""
    value = device.attributes.get(f"{domain}/{name}")
    if value is None and domain == driver:
        value = device.attributes.get(name)
    return value


def device_matches(profile: DeviceProfile, driver: str, device: SliceDevice) -> bool:
    """``profile``'s selector evaluated on one device of ``driver`` (the built-in selectors
    written out; see the module table)."""
    if driver != profile.driver:
        return False
    if profile is GPU_NVIDIA or profile.name == GPU_NVIDIA.name:
        return _attr(device, driver, "gpu.nvidia.com", "type") == "gpu"
    if profile.name == DRANET_RDMA.name:
        return (
            _attr(device, driver, "dra.net", "pciAddress") is not None
            and _attr(device, driver, "dra.net", "rdma") is True
        )
    return True


def match_device_class(dc: KubeDeviceClass) -> DeviceProfile:
    """The profile a DeviceClass selects (Slinky ``Registry.MatchDeviceClass``).

    Raises:
        ProfileError: the class has ``config``; not exactly one selector; a selector that is
            not CEL; an expression that is not exactly a built-in profile's selector.
    """
    name = dc.key
    if dc.has_config:
        raise ProfileError(f"DeviceClass {name!r}: spec.config is not supported")
    if len(dc.selectors) != 1:
        raise ProfileError(
            f"DeviceClass {name!r}: spec.selectors must hold exactly one selector "
            f"(has {len(dc.selectors)})"
        )
    expression = dc.selectors[0]
    if expression is None:
        raise ProfileError(f"DeviceClass {name!r}: spec.selectors[0] must be a CEL selector")
    profile = BY_SELECTOR.get(expression)
    if profile is None:
        raise ProfileError(
            f"DeviceClass {name!r}: spec.selectors[0].cel.expression matches no supported "
            f"device profile ({', '.join(p.name for p in PROFILES)}; the expression must be "
            "the profile's selector exactly)"
        )
    return profile


# --- the node inventory ------------------------------------------------------------------------


class Inventory(msgspec.Struct, frozen=True, kw_only=True):
    """The profile-classified devices of one node: profile name → devices in order. The
    profiles are in name order; only profiles with devices appear."""

    node: str
    profiles: dict[str, tuple[DeviceId, ...]] = {}

    def devices(self, profile: str) -> tuple[DeviceId, ...]:
        """The devices of one profile (``()`` when the node has none)."""
        return self.profiles.get(profile, ())


def node_inventory(node: str, slices: Iterable[KubeResourceSlice]) -> Inventory:
    """The node's inventory from ResourceSlices (module docstring). ``slices`` holds the
    node's slices and any other slice of the same pools (to count a pool's slices); devices
    are taken from slices whose ``node`` is ``node`` only.

    Raises:
        ProfileError: inconsistent ``slice_count`` within a pool generation; an incomplete
            pool that publishes devices for the node; a device claimed by two profiles; one
            device identity published twice.
    """
    drivers = {p.driver for p in PROFILES}
    pools: dict[tuple[str, str], list[KubeResourceSlice]] = {}
    for s in slices:
        if s.deleted or s.driver not in drivers:
            continue
        current = pools.get((s.driver, s.pool))
        if current is None or s.pool_generation > current[0].pool_generation:
            pools[(s.driver, s.pool)] = [s]
        elif s.pool_generation == current[0].pool_generation:
            if s.node != current[0].node:
                raise ProfileError(
                    f"DRA resource pool {s.driver}/{s.pool} generation {s.pool_generation} has "
                    f"inconsistent nodeName values {current[0].node!r} and {s.node!r}"
                )
            if s.slice_count != current[0].slice_count:
                raise ProfileError(
                    f"DRA resource pool {s.driver}/{s.pool} generation {s.pool_generation} has "
                    f"inconsistent resourceSliceCount values {current[0].slice_count} and "
                    f"{s.slice_count}"
                )
            current.append(s)
    found: dict[str, list[DeviceId]] = {}
    seen: set[DeviceId] = set()
    for (driver, pool), members in sorted(pools.items()):
        if members[0].node != node:
            # Another node's pool, or one not bound to a node (allNodes, a node selector):
            # its devices are not this node's.
            continue
        # A count of 0 is an observation without spec.pool.resourceSliceCount (the API
        # server requires it to be at least 1): nothing to check the pool against.
        if members[0].slice_count and len(members) != members[0].slice_count:
            raise ProfileError(
                f"DRA resource pool {driver}/{pool} generation {members[0].pool_generation} "
                f"is incomplete: found {len(members)} of {members[0].slice_count} "
                "ResourceSlices"
            )
        candidates = [p for p in PROFILES if p.driver == driver]
        for s in members:
            for d in s.devices:
                matched = [p for p in candidates if device_matches(p, driver, d)]
                if not matched:
                    continue
                ident = (driver, pool, d.name)
                if len(matched) > 1:
                    raise ProfileError(
                        f"DRA device {'/'.join(ident)} matches overlapping device profiles "
                        f"{matched[0].name!r} and {matched[1].name!r}"
                    )
                if ident in seen:
                    raise ProfileError(f"duplicate DRA device identity {'/'.join(ident)}")
                seen.add(ident)
                found.setdefault(matched[0].name, []).append(ident)
    return Inventory(node=node, profiles={n: tuple(sorted(found[n])) for n in sorted(found)})


# --- Slurm's view of it ------------------------------------------------------------------------


def device_path(device: DeviceId) -> str:
    """``/dra/<driver>/<pool>/<device>`` (Slinky ``encodeDevicePath``)."""
    return DEVICE_PATH_PREFIX + "/".join(device)


class GresConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What Slurm is told about a node's indexed-GRES devices: ``gres`` (``Gres=``),
    ``gres_conf`` (``GresConf=``), ``extra`` (the applied inventory, ``""`` without devices)
    and ``conf_lines`` (the ``gres.conf`` entries a hybrid node would need, one per profile:
    ``Name=<gres> Type=<profile> Count=<n>``)."""

    gres: str = ""
    gres_conf: str = ""
    extra: str = ""
    conf_lines: tuple[str, ...] = ()


def gres_config(inventory: Inventory) -> GresConfig:
    """The node's ``Gres=``, ``GresConf=`` and applied inventory (module docstring)."""
    gres: list[str] = []
    conf: list[str] = []
    lines: list[str] = []
    applied: dict[str, dict[str, object]] = {}
    next_index: dict[str, int] = {}
    for name, devices in inventory.profiles.items():
        profile = BY_NAME[name]
        if profile.backend != "indexed-gres" or not devices:
            continue
        gres.append(f"{profile.gres_name}:{name}:{len(devices)}")
        conf.extend(
            f"count=1,name={profile.gres_name},type={name},file={device_path(d)}" for d in devices
        )
        lines.append(f"Name={profile.gres_name} Type={name} Count={len(devices)}")
        first = next_index.get(profile.gres_name, 0)
        applied[name] = {"firstIndex": first, "devices": [device_path(d) for d in devices]}
        next_index[profile.gres_name] = first + len(devices)
    if not gres:
        return GresConfig()
    body = json.dumps(
        {"v": APPLIED_VERSION, "profiles": dict(sorted(applied.items()))}, separators=(",", ":")
    )
    return GresConfig(
        gres=",".join(gres),
        gres_conf="+".join(conf),
        extra=APPLIED_PREFIX + body,
        conf_lines=tuple(lines),
    )


def gres_equal(a: str, b: str) -> bool:
    """Two ``Gres=`` strings name the same entries in any order (Slinky ``gresEqual``)."""
    return sorted(a.split(",")) == sorted(b.split(","))


def missing_gres(current: str, required: str) -> tuple[str, ...]:
    """The ``required`` entries a slurmd-registered node's ``Gres`` lacks (Slinky
    ``validateHybridNodeGRES``: each DRA-managed ``name:type:count`` must be present exactly;
    other entries of the node are the administrator's and ignored; an ``(IDX…)``/``(S:…)``
    suffix is dropped)."""
    have = {e.strip().split("(", 1)[0] for e in current.split(",")}
    return tuple(r for r in required.split(",") if r and r not in have)


class Applied(msgspec.Struct, frozen=True, kw_only=True):
    """A decoded applied inventory: profile name → (first Slurm index, devices)."""

    profiles: dict[str, tuple[int, tuple[DeviceId, ...]]] = {}

    def devices(self, profile: str, indices: Sequence[int]) -> tuple[DeviceId, ...]:
        """The devices Slurm's ``indices`` of ``profile`` stand for, in the order given
        (Slinky ``AppliedInventory.Devices``).

        Raises:
            ProfileError: the profile is absent; an index outside its range; a repeated index.
        """
        entry = self.profiles.get(profile)
        if entry is None:
            raise ProfileError(f"applied inventory does not contain device profile {profile!r}")
        first, devices = entry
        out: list[DeviceId] = []
        seen: set[int] = set()
        for index in indices:
            local = index - first
            if not 0 <= local < len(devices):
                raise ProfileError(
                    f"Slurm GRES index {index} is outside device profile {profile!r} inventory "
                    f"range {first}-{first + len(devices) - 1}"
                )
            if index in seen:
                raise ProfileError(
                    f"Slurm GRES index {index} is repeated for device profile {profile!r}"
                )
            seen.add(index)
            out.append(devices[local])
        return tuple(out)


def _decode_path(path: object) -> DeviceId:
    if not isinstance(path, str) or not path.startswith(DEVICE_PATH_PREFIX):
        raise ProfileError(f"device path {path!r} must start with {DEVICE_PATH_PREFIX!r}")
    driver, _, rest = path[len(DEVICE_PATH_PREFIX) :].partition("/")
    pool, _, device = rest.rpartition("/")
    if not driver or not pool or not device:
        raise ProfileError(f"device path {path!r} must contain a driver, pool, and device name")
    return (driver, pool, device)


def decode_applied(extra: str) -> Applied:
    """Decode a Slurm node ``extra`` written by :func:`gres_config` (versions 1 and 2, as
    Slinky ``DecodeAppliedInventory`` reads them; version 1 lists devices without
    ``firstIndex``, i.e. from 0).

    Raises:
        ProfileError: no ``slurm-bridge.dra-gres-map=`` prefix; bad JSON; an unknown version;
            no ``profiles`` map; an empty profile name; a negative ``firstIndex``; a bad path.
    """
    if not extra.startswith(APPLIED_PREFIX):
        raise ProfileError("Slurm node extra does not contain a DRA GRES map")
    try:
        wire = json.loads(extra[len(APPLIED_PREFIX) :])
    except ValueError as exc:
        raise ProfileError(f"decode applied inventory: {exc}") from None
    if not isinstance(wire, dict):
        raise ProfileError("decode applied inventory: not a JSON object")
    version = wire.get("v")
    profiles = wire.get("profiles")
    if version not in (1, APPLIED_VERSION):
        raise ProfileError(f"unsupported applied inventory version {version}")
    if not isinstance(profiles, dict):
        raise ProfileError("applied inventory has no profiles map")
    out: dict[str, tuple[int, tuple[DeviceId, ...]]] = {}
    for name, entry in profiles.items():
        if not name:
            raise ProfileError("applied inventory contains an empty device profile name")
        if version == 1:
            first, paths = 0, entry
        elif isinstance(entry, dict):
            first, paths = entry.get("firstIndex", 0), entry.get("devices", [])
        else:
            raise ProfileError(f"applied inventory device profile {name!r} is not an object")
        if not isinstance(first, int) or first < 0:
            raise ProfileError(
                f"applied inventory device profile {name!r} has negative first Slurm GRES "
                f"index {first}"
            )
        if not isinstance(paths, list):
            raise ProfileError(f"applied inventory device profile {name!r} has no device list")
        out[name] = (first, tuple(_decode_path(p) for p in paths))
    return Applied(profiles=out)


def applied_of(inventory: Inventory) -> Applied:
    """The applied inventory :func:`gres_config` would write for ``inventory``."""
    extra = gres_config(inventory).extra
    return decode_applied(extra) if extra else Applied()


def resolve(
    device_class: str, classes: Mapping[str, KubeDeviceClass]
) -> DeviceProfile | ProfileError | None:
    """The profile of a class by name: its DeviceClass's profile; the error why its
    DeviceClass matches none; None when the log holds no such DeviceClass."""
    dc = classes.get(device_class)
    if dc is None or dc.deleted:
        return None
    try:
        return match_device_class(dc)
    except ProfileError as exc:
        return exc

"""Well-known names of Dynamic Resource Allocation (``resource.k8s.io/v1``) that slurmbridge
reads and writes, and the device classes it allocates from Slurm (Slinky slurm-bridge
``internal/nodeinfo`` and the section "Supported DRA DeviceClasses" of its workload.md; ours:
docs/dra.md)."""

from __future__ import annotations

from typing import Final

#: Prefix of a DRA extended resource: ``deviceclass.resource.kubernetes.io/<class>``
#: (resource.k8s.io/v1 ``ResourceDeviceClassPrefix``).
DEVICE_CLASS_PREFIX: Final = "deviceclass.resource.kubernetes.io/"
#: The CPU DRA driver's class (kubernetes-sigs dra-driver-cpu; Slinky ``cpuinfo.go``).
CPU_CLASS: Final = "dra.cpu"
#: NVIDIA k8s-dra-driver-gpu (Slinky ``gpuinfo.go``).
NVIDIA_CLASS: Final = "gpu.nvidia.com"
#: The dra-example-driver (Slinky ``gpuinfo.go``).
EXAMPLE_CLASS: Final = "gpu.example.com"
#: Device classes slurmbridge allocates from Slurm, and their kind (``cpu`` or ``gpu``):
#: Slinky slurm-bridge ``internal/nodeinfo/nodeinfo.go`` ``supportedDRADeviceClasses``. The
#: class name is also the driver name of its devices.
SUPPORTED: Final[dict[str, str]] = {CPU_CLASS: "cpu", NVIDIA_CLASS: "gpu", EXAMPLE_CLASS: "gpu"}
#: Annotation of a claim made for a pod's extended resources (resource.k8s.io/v1
#: ``ExtendedResourceClaimAnnotation``).
EXTENDED_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
#: Annotation the resourceclaim controller puts on a claim made from a template
#: (resource.k8s.io/v1 ``PodResourceClaimAnnotation``).
POD_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"


def device_class_of(resource: str) -> str | None:
    """The device class of a DRA extended resource name, None for any other resource."""
    if resource.startswith(DEVICE_CLASS_PREFIX):
        return resource[len(DEVICE_CLASS_PREFIX) :]
    return None

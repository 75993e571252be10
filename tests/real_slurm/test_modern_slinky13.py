"""Slinky 1.3's rules (issue 28) against real Slurm 26.05 (REST v0.0.45).

1. The ``k8s/`` feature sync keeps a node's inactive features inactive (slurm-operator
   ``internal/controller/nodeset/slurmcontrol/slurmcontrol.go`` ``UpdateNodeFeatures``).

Every test restores the nodes it changed.
"""

from __future__ import annotations

import pytest

from schemas.actions import SetSlurmNodeOwnedFeatures
from slurmbridge.devtools.realslurm_modern import ModernSlurm
from slurmbridge.effectors.slurm_nodes import SlurmEffector
from slurmbridge.slurm.client import SlurmClient

CLUSTER = "linux"


def _features(slurm: ModernSlurm, node: str) -> tuple[list[str], list[str]]:
    """(available, active) as ``scontrol show node`` prints them."""
    fields = dict(
        f.split("=", 1) for f in slurm.scontrol("-o", "show", "node", node).split() if "=" in f
    )

    def listed(key: str) -> list[str]:
        value = fields.get(key, "(null)")
        return [] if value == "(null)" else sorted(value.split(","))

    return listed("AvailableFeatures"), listed("ActiveFeatures")


async def test_owned_features_keep_a_plugins_inactive_feature_inactive(
    modern_slurm: ModernSlurm,
) -> None:
    """slurmcontrol_test.go "plugin-managed features survive", on slurmctld: ``mig=off``
    available but not active stays inactive while ``k8s/old`` becomes ``k8s/nn-a`` in both
    sets (26.05 accepts the pair: active ⊆ available, errno 2031 otherwise)."""
    if modern_slurm.release != "26.05":
        pytest.skip("issue 28 names 26.05")
    node = "n4"
    before = _features(modern_slurm, node)
    modern_slurm.scontrol(
        "update",
        f"nodename={node}",
        "AvailableFeatures=foo,mig=on,mig=off,k8s/old",
        "ActiveFeatures=foo,mig=on,k8s/old",
    )
    try:
        assert _features(modern_slurm, node) == (
            ["foo", "k8s/old", "mig=off", "mig=on"],
            ["foo", "k8s/old", "mig=on"],
        )
        async with SlurmClient(
            modern_slurm.url, modern_slurm.token_file, modern_slurm.user
        ) as client:
            effector = SlurmEffector({CLUSTER: client})
            action = SetSlurmNodeOwnedFeatures(
                cluster=CLUSTER, node=node, prefix="k8s/", features=("k8s/nn-a",)
            )
            assert (await effector.apply(action)).outcome == "ok"
            assert _features(modern_slurm, node) == (
                ["foo", "k8s/nn-a", "mig=off", "mig=on"],
                ["foo", "k8s/nn-a", "mig=on"],
            )
            assert (await effector.apply(action)).outcome == "noop"
    finally:
        available = ",".join(before[0]) or ""
        active = ",".join(before[1]) or ""
        modern_slurm.scontrol(
            "update",
            f"nodename={node}",
            f"AvailableFeatures={available}",
            f"ActiveFeatures={active}",
        )

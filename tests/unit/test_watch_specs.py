"""The watchers that differ only in data are rows of one table (issue 31 item 3):
:class:`producers.kube.watch.WatchSpec` records run by the one ``SpecWatcher``."""

from __future__ import annotations

from typing import Any

import orjson

from producers.kube import watch
from schemas import events


async def _publish(batch: Any) -> list[Any]:
    return []


def test_data_only_resources_are_specs_of_one_watcher() -> None:
    specs = {
        r.extra["spec"].resource: r.observes
        for r in watch.RESOURCES
        if r.watcher is watch.SpecWatcher
    }
    assert specs == {
        "nodesets": events.KubeNodeSet,
        "clusters": events.SlurmCluster,
        "resourceslices": events.KubeResourceSlice,
        "resourceclaims": events.KubeResourceClaim,
        "deviceclasses": events.KubeDeviceClass,
    }
    assert (watch.NODESETS.group, watch.NODESETS.version) == ("slinky.slurm.net", "v1beta1")
    assert (watch.CLUSTERS.group, watch.CLUSTERS.version) == ("slinky.slurm.net", "v1alpha1")
    assert {(s.group, s.version) for s in (watch.RESOURCE_SLICES, watch.DEVICE_CLASSES)} == {
        ("resource.k8s.io", "v1")
    }


async def test_a_spec_watcher_decodes_and_translates_with_its_spec() -> None:
    w = watch.SpecWatcher(None, _publish, producer="kube-test", seed={}, spec=watch.DEVICE_CLASSES)
    assert w.resource == "deviceclasses"
    body = orjson.dumps(
        {
            "metadata": {"resourceVersion": "7"},
            "items": [
                {
                    "metadata": {"name": "gpu.example.com", "uid": "u1", "resourceVersion": "5"},
                    "spec": {"selectors": [{"cel": {"expression": "true"}}]},
                }
            ],
        }
    )
    items, rv = w._decode_list(body)
    assert rv == "7"
    ev = w._translate(items[0], 1)
    assert isinstance(ev, events.KubeDeviceClass)
    assert (ev.key, ev.selectors) == ("gpu.example.com", ("true",))

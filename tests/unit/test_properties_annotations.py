"""Properties of the parsers of user-written annotations: whatever text a user puts in a
pod's, Job's or NodeSet's annotations, the rules either read it or reject it with their own
typed error, which the decision turns into a reason (or a ``SlurmJobInvalid`` condition) —
never an exception that makes the reconcile give up.

* ``reconcilers._pods.translate`` (``slurmjob.slinky.slurm.net/*``): a sane
  :class:`SlurmJobSpec`, or :class:`TranslationError` naming the annotation;
* ``reconcilers.autoscale.policy_of`` (``autoscale.slurmbridge.dev/*``): a sane
  :class:`Policy`, ``None``, or :class:`PolicyError`;
* ``reconcilers.nodeset``: the failures annotation, pod deletion costs and ordinals of any
  text, through a whole decision.
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Callable
from typing import TypeVar

from hypothesis import example, given
from hypothesis import strategies as st

from reconcilers import _pods, autoscale, nodeset
from schemas import wellknown
from schemas.actions import SlurmJobSpec
from schemas.events import KubeNodeSet, KubePod, OwnerRef
from tests.unit._pods import kube_nodeset, kube_pod
from tests.unit._states import CTX
from tests.unit._world import World

T = TypeVar("T")
E = TypeVar("E", bound=Exception)


def _outcome(call: Callable[[], T], error: type[E]) -> T | E:
    """``call()``, or the ``error`` it raised (any other exception propagates)."""
    try:
        return call()
    except error as exc:
        return exc


#: Text that looks like what the parsers expect, and text that does not.
numberish = st.one_of(
    st.from_regex(r"\A *-?[0-9]{1,400}(\.[0-9]{1,5})?(e[0-9]{1,4})?(Ki|Mi|Gi|Ti|K|M|G|T)? *\Z"),
    st.from_regex(r"\A([0-9]{1,6}-)?[0-9]{1,6}(:[0-9]{1,6}){0,3}\Z"),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "0", "-0", "1_000", "\u0661\u0662", "\u00b2"]),
    st.sampled_from(["true", "false", "TRUE", " false ", "yes", "gpu:2", "gres/gpu=1", "p1,p2"]),
)
values = st.one_of(numberish, st.text(max_size=12))


@st.composite
def slurmjob_annotations(draw: st.DrawFn) -> dict[str, str]:
    names = draw(st.lists(st.sampled_from(_pods.ANNOTATIONS), unique=True, max_size=6))
    return {_pods.PREFIX + n: draw(values) for n in names}


GROUP = _pods.Group(namespace="ns", kind="Job", name="train")


def pod(i: int, cpu: int, mem: int, gpus: int) -> KubePod:
    return kube_pod(
        "ns",
        f"train-{i}",
        cpu_millis=cpu,
        memory_bytes=mem,
        gpus=gpus,
        owner=OwnerRef(api_version="batch/v1", kind="Job", name="train"),
    )


pods = st.lists(
    st.builds(
        pod,
        st.integers(0, 9),
        st.integers(0, 64_000),
        st.integers(0, 2**40),
        st.integers(0, 8),
    ),
    min_size=1,
    max_size=4,
)


@given(slurmjob_annotations(), pods)
@example({_pods.PREFIX + "mem-per-node": "1" * 400}, [pod(0, 0, 0, 0)])
@example({_pods.PREFIX + "timelimit": "9" * 5000}, [pod(0, 0, 0, 0)])
@example({_pods.PREFIX + "timelimit": "1000000000000"}, [pod(0, 0, 0, 0)])
@example({_pods.PREFIX + "priority": "4294967296"}, [pod(0, 0, 0, 0)])
def test_translate_gives_a_sane_job_or_names_the_annotation(
    annotations: dict[str, str], group: list[KubePod]
) -> None:
    spec = _outcome(lambda: _pods.translate(GROUP, group, annotations), _pods.TranslationError)
    if isinstance(spec, _pods.TranslationError):
        assert spec.field.startswith(f"metadata.annotations[{_pods.PREFIX}")
        assert spec.field[len("metadata.annotations[") : -1] in annotations
        return
    assert isinstance(spec, SlurmJobSpec)
    assert spec.tasks == len(group)
    assert spec.cpus_per_task >= 1
    assert 1 <= spec.min_nodes <= (spec.max_nodes or spec.min_nodes)
    assert spec.memory_per_node_mib is None or spec.memory_per_node_mib > 0
    # Slurm's uint32_no_val bound: from NO_VAL up, slurmrestd reads INFINITE.
    assert spec.time_limit_minutes is None or 0 < spec.time_limit_minutes <= _pods.MAX_UINT32_NO_VAL
    assert spec.priority is None or 0 <= spec.priority <= _pods.MAX_UINT32_NO_VAL
    assert "," not in spec.partition
    for text in (spec.name, spec.partition, spec.account, spec.qos, spec.licenses):
        assert not any(c in text for c in "\n\r\t"), text


@st.composite
def policy_annotations(draw: st.DrawFn) -> dict[str, str]:
    names = ["partition", "min-replicas", "max-replicas", "jobs-per-node", "cooldown"]
    names += ["idle-to-zero-after", "enabled"]
    chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=7))
    return {autoscale.PREFIX + n: draw(values) for n in chosen}


@given(policy_annotations())
@example({autoscale.PREFIX + "partition": "p", autoscale.PREFIX + "max-replicas": "nan"})
@example({autoscale.PREFIX + "partition": "p", autoscale.PREFIX + "max-replicas": "1e400"})
def test_autoscale_policy_is_sane_or_a_policy_error(annotations: dict[str, str]) -> None:
    policy = _outcome(lambda: autoscale.policy_of(annotations), autoscale.PolicyError)
    if isinstance(policy, autoscale.PolicyError):
        assert str(policy).startswith(autoscale.PREFIX)
        return
    if policy is None:
        return
    assert 0 <= policy.min_replicas <= policy.max_replicas
    assert policy.jobs_per_node >= 1
    assert math.isfinite(policy.cooldown_s)
    assert policy.cooldown_s >= 0
    assert math.isfinite(policy.idle_to_zero_s)
    assert policy.idle_to_zero_s >= 0
    view = autoscale.View(
        nodeset=KubeNodeSet(source="k8s", key="s/gpu", annotations=annotations),
        pending=3,
        running=0,
        last_end=0,
        busy=0,
        now=CTX.now,
    )
    autoscale.decide(view)  # a readable policy decides without raising


pod_names = st.one_of(
    st.from_regex(r"\Agpu-[0-9]{1,3}\Z"),
    st.text(alphabet=string.ascii_letters + string.digits + "-\u00b2\u0661", max_size=8).map(
        lambda s: "gpu-" + s
    ),
)
failures = st.one_of(
    st.dictionaries(
        pod_names,
        st.one_of(
            st.tuples(st.integers(-5, 50), st.integers(0, 2 * int(CTX.now)), st.text(max_size=4)),
            st.lists(st.integers(), max_size=4),
            st.text(max_size=4),
        ),
        max_size=3,
    ).map(json.dumps),
    st.text(max_size=20),
)


@given(
    failures,
    st.lists(st.tuples(pod_names, st.sampled_from(["Running", "Failed"]), values), max_size=4),
    st.integers(-1, 5),
)
@example('{"gpu-\u00b2": [1, 99995, "u"]}', [], 1)
def test_nodeset_decides_whatever_its_annotations_say(
    failures_annotation: str, members: list[tuple[str, str, str]], replicas: int
) -> None:
    ns = kube_nodeset(
        "slurm",
        "gpu",
        uid="ns-uid",
        replicas=replicas,
        annotations={wellknown.ANNOTATION_NODESET_POD_FAILURES: failures_annotation},
    )
    objs: list[KubeNodeSet | KubePod] = [ns]
    for name, phase, cost in members:
        objs.append(
            kube_pod(
                "slurm",
                name,
                uid=f"uid-{name}",
                phase=phase,
                labels={"app.kubernetes.io/name": "slurmd", "app.kubernetes.io/instance": "gpu"},
                annotations={wellknown.ANNOTATION_POD_DELETION_COST: cost},
            )
        )
    w = World(objs, CTX.now)
    decision = nodeset.decide(nodeset.view(w.store(), "slurm/gpu", CTX))
    assert decision.reason
    for name in nodeset.failures_of(ns):
        ordinal = nodeset.ordinal_of("gpu", name)
        assert ordinal is None or int(name.removeprefix("gpu-")) == ordinal

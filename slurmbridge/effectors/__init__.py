"""Effectors: the only code that changes Kubernetes or Slurm.

One module per object the effects touch — :mod:`.nodes` (taints, node conditions),
:mod:`.clusters` (Cluster status), :mod:`.events` (Kubernetes Events), :mod:`.podgroups`,
:mod:`.slurm_nodes`, :mod:`.pods` (Slurm jobs, binding, pod deletion), :mod:`.pod_writes`
(pod marks, finalizers, conditions), :mod:`.claims` (DRA ResourceClaims), :mod:`.nodesets`
(the NodeSet object and its status, scale, PDB), :mod:`.nodeset_pods`, :mod:`.revisions`
(ControllerRevisions), :mod:`.slurm_objects` (a NodeSet's Slurm reservation and partition).
Each effector maps every action type it performs to a handler taking exactly that type
(``TABLE``, checked when the class is made: :meth:`.common.Effector.__init_subclass__`), and
:mod:`.router` checks at import that every action type of :data:`schemas.actions.AnyAction`
has one handler. Kubernetes is reached through :mod:`slurmbridge.kube` only (its typed errors,
:mod:`slurmbridge.kube.errors`); errors are mapped to outcomes once
(:func:`.common.effect_error`).

Each effector is idempotent and checks preconditions against the live object, because the
decision it carries out was made on the projection, which may be a poll interval old:

* taints: read the node, compute the new taint list, skip when already right, then a
  strategic-merge patch that carries ``metadata.resourceVersion`` — the API server rejects it
  with 409 if the node changed meanwhile (``spec.taints`` has no patch merge key in the
  Kubernetes API, so the whole list is sent; the resourceVersion makes that safe).
* drain: re-read the Slurm node; already DRAIN ⇒ nothing (whoever drained it owns it).
* undrain: re-read; only when the reason is empty or starts with one of the action's
  ``owned_prefixes`` — an administrator's drain set since the decision is never undone.
* create: one ``POST /new/node/``; Slurm's "already exists" (2168) counts as done.
* delete: re-read; only a node that is DRAIN with one of our reasons and runs nothing.
* features: re-read; skip when already equal. Node conditions: strategic merge on
  ``status.conditions`` (merge key ``type``), so the kubelet's conditions stay untouched.

Failures are classified into :class:`~slurmbridge.runtime.outcomes.Transient` (retry later) and
:class:`~slurmbridge.runtime.outcomes.Permanent` (dead letter). Slurm's ``Unsupported`` (e.g. node
updates on v0.0.38) is reported as the ``unsupported`` outcome, which the worker records once.
"""

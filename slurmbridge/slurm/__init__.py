"""The Slurm REST client: version-neutral models, one codec per API version, typed errors.

Use :class:`slurmbridge.slurm.client.SlurmClient`; it negotiates the highest API version the
server offers among :data:`slurmbridge.slurm.codecs.SUPPORTED` and returns the models of
:mod:`slurmbridge.slurm.models`, raising the errors of :mod:`slurmbridge.slurm.errors`.
"""

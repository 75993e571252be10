"""The Kubernetes side, as :mod:`slurmbridge.slurm` is the Slurm side: client set-up, the
wire Structs, label selectors (docs/architecture.md "Packages"). Imports schemas only among
the project's packages.
"""

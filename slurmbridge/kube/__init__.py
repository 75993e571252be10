"""The Kubernetes side, as :mod:`slurmbridge.slurm` is the Slurm side: client set-up, the
wire Structs, label selectors (DESIGN §1). Imports schemas only among the project's packages.
"""

"""The Slurm producer: pure translation (:mod:`.translate`) and the poller (:mod:`.poller`)."""

"""slurmbridge runtime: config, bus, projections, worker, effectors, clients, CLI, simulators."""

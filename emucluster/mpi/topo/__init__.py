"""Virtual topologies: the pure arithmetic, the topology communicators and their creation."""

"""Point-to-point calls beyond Send/Recv: buffered sends, matched probes, persistent requests."""

"""The link: wire format, go-back-N reliability, RTO, per-peer channels and the fault plan
(GRIM 4.2-4.3)."""

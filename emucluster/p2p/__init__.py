"""The host's point-to-point engine (sans-IO).

Envelopes and their stores, matching, eager and rendezvous.
"""

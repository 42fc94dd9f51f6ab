"""Requests and their completion, statuses, and generalized requests."""

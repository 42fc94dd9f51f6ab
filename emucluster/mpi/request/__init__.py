"""Requests and their completion, statuses, and integer handles of live objects."""

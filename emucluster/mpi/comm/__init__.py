"""Communicators.

The handle classes, their state, groups, attributes, creation from groups, Free, sessions.
"""

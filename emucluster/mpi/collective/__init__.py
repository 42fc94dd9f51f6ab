"""The collective calls of a communicator.

Blocking, nonblocking and v-forms, their buffer plans, reduction ops.
"""

"""The C type of ``_exporter.c``: PEP 688's buffer export for Python 3.11."""

class Exporter:
    """A base whose instances export the buffer their ``__buffer__(flags)`` returns."""

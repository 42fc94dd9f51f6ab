"""One-sided communication executed by the NIC: ``MPI.Win`` and its operations.

`window` (the ``Win`` handle class), `state` (a window's memory and epochs), `transfer`
(Put/Get/accumulates/atomics as NIC operations), `sync` (Fence, locks, PSCW), `requests`
(the request forms), `engine` (one rank's GRIM endpoint for windows and its waits),
`constants`.
"""

"""``python -m emucluster.mpi4py_shim``: print the directory to put first on PYTHONPATH."""

from emucluster.mpi4py_shim import SHIM_PATH

print(SHIM_PATH)

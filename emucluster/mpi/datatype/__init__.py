"""MPI datatypes: predefined and derived types, their type maps, codes, packing and darray."""

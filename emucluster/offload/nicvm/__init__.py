"""NICVM broadcast (thesis ch. 4): the algorithm and the module-upload shell."""

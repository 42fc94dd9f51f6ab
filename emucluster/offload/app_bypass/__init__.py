"""Application-bypass reduce (thesis ch. 3): the sans-IO core and the signal shell."""

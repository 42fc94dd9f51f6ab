"""Coverage-guided fuzzing of every decoder that takes bytes from outside: the targets
(`targets.py`), their seeds, the atheris runner (`run.py`) and the committed corpus, which the
normal suite replays without atheris (`test_corpus.py`)."""

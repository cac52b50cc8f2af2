"""Evaluation tools run from the project root, not shipped with the app: the load runs and their
reports (`loadtest/`), and the baseline schedulers they compare fairsched with (`baselines.py`)."""

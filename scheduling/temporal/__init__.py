"""Temporal integration: the client of the sync shell, the demo workflows and their worker.

This package imports nothing on its own: the workflow sandbox imports `workflows` (and through it
`activities`) and must not pull in Django, which `client` and `worker` use.
"""

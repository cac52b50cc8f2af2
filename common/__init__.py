"""What every app shares: errors, after-commit events, actors, strict input, one-statement reads,
the API's generic shell, the live-socket base and admin helpers. Imports no app and no project wiring."""

"""The test database as another process reaches it."""

from django.conf import settings


def database_url() -> str:
    """The URL of the test database, for a server or worker started as another process."""
    db = settings.DATABASES["default"]
    auth = (db["USER"] or "postgres") + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"

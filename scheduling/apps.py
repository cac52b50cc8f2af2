from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        # Logging out closes the live sockets of that session (the dashboard's and the portal's).
        from common.sockets import connect_signals

        connect_signals()

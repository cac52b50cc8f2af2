from django.apps import AppConfig


class FairschedConfig(AppConfig):
    name = "fairsched"
    verbose_name = "fairsched"

    def ready(self) -> None:
        # Every process that loads Django traces when OTEL_EXPORTER_OTLP_ENDPOINT is set (common.tracing);
        # the Celery worker sets up before it forks its pool (the span processor restarts its thread in each child).
        from common import tracing

        tracing.setup(service="fairsched")

from django.apps import AppConfig


class KnobsConfig(AppConfig):
    name = "knobs"
    verbose_name = "Scheduler settings"

from django.apps import AppConfig


class FeedConfig(AppConfig):
    name = "feed"
    verbose_name = "Change feed and webhooks"

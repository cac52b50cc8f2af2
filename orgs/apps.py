from django.apps import AppConfig


class OrgsConfig(AppConfig):
    name = "orgs"
    verbose_name = "Tenants"

    def ready(self) -> None:
        # The admin's datetimes in the viewer's zone, on every registered model's pages.
        from common.admin_times import install

        install()

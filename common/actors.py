"""Who acts: the actor every write service is handed, and the name the event log and histories keep.

An actor is staff (an operator: every org, every lever), a tenant (the orgs it may write in, and the
tenant's levers only) or the system (the dispatcher, the reconciler, a command: trusted as staff).
The service that knows what a lever may do asks the actor (`staff_required`, `org_required`), so no
caller has to remember to: a tenant reaching for an operator's lever is refused (403, naming the
field), and another org's row is simply not there for it (404, as the selectors answer).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from common.errors import Forbidden, NotFound


@dataclass(frozen=True)
class Actor:
    """Who acts (`name`, as the logs keep it: `str(actor)`), whether as staff, and in which orgs a
    tenant may write (`org_ids`; staff and the system reach every org)."""

    name: str
    staff: bool
    org_ids: frozenset[int] = frozenset()

    @classmethod
    def operator(cls, user: Any) -> Actor:
        """A staff person: 'user:<username>'."""
        return cls(name=f"user:{user.get_username()}", staff=True)

    @classmethod
    def tenant(cls, user: Any, org_ids: Iterable[int]) -> Actor:
        """A member (or an org token) writing in `org_ids`: 'user:<username>'."""
        return cls(name=f"user:{user.get_username()}", staff=False, org_ids=frozenset(org_ids))

    @classmethod
    def system(cls, name: str) -> Actor:
        """The scheduler itself or a command: 'system:<name>', trusted as staff."""
        return cls(name=f"system:{name}", staff=True)

    def __str__(self) -> str:
        return self.name

    def reaches(self, org_id: int) -> bool:
        return self.staff or org_id in self.org_ids

    def staff_required(self, *, field: str, what: str = "this") -> None:
        """Refuse (403, naming `field`) an operators' lever to a tenant."""
        if not self.staff:
            raise Forbidden(f"only operators (staff) may change {what}", field=field)

    def org_required(self, org_id: int, *, field: str = "org") -> None:
        """Refuse (404) a row of an org the tenant does not write in: to it, that row is not there."""
        if not self.reaches(org_id):
            raise NotFound(f"{field} not found", field=field)


DISPATCHER = Actor.system("dispatcher")
RECONCILER = Actor.system("reconciler")

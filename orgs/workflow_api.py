"""Workflow endpoints: anyone signed in reads the workflows with what they mean for their org (cost and
expected duration, which scheduling computes: the project's routes give it, `WorkflowViewSet.wired`);
staff register and change them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol, cast

from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from common.api import ETAG, IF_MATCH, CursorPagination, FairschedAPIView, if_match_check, with_etag
from orgs import services
from orgs.access import IsStaffScope, actor_of, visible_org_ids
from orgs.models import Org, Workflow
from orgs.selectors import org_for_input, provider_for_input, workflow_get, workflows_all
from orgs.serializers import (
    WorkflowCreateSerializer,
    WorkflowSerializer,
    WorkflowTermsQuerySerializer,
    WorkflowTermsSerializer,
    WorkflowUpdateSerializer,
)


class WorkflowTermsOf(Protocol):
    def __call__(self, *, workflows: Sequence[Workflow], org: Org | None) -> Sequence[object]: ...


class WorkflowCursorPagination(CursorPagination):
    ordering = "name"


class WorkflowViewSet(FairschedAPIView, viewsets.GenericViewSet[Workflow]):
    """The kinds of chart that may be submitted: anyone signed in reads them; staff register and change them."""

    # The workflows' terms for an org (`WorkflowTermsSerializer` shows them): given by `wired`.
    workflow_terms: ClassVar[WorkflowTermsOf]

    serializer_class = WorkflowTermsSerializer
    pagination_class = WorkflowCursorPagination
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    @classmethod
    def wired(cls, *, workflow_terms: WorkflowTermsOf) -> type[WorkflowViewSet]:
        """This viewset reading the workflows' terms with `workflow_terms`."""
        attributes = {
            "__module__": cls.__module__,
            "__doc__": cls.__doc__,
            "workflow_terms": staticmethod(workflow_terms),
        }
        return cast(type[WorkflowViewSet], type(cls.__name__, (cls,), attributes))

    def get_permissions(self) -> list[BasePermission]:
        if self.action in {"create", "partial_update"}:
            return [IsAuthenticated(), IsStaffScope()]
        return [IsAuthenticated()]

    def get_queryset(self) -> QuerySet[Workflow]:
        return workflows_all()

    @extend_schema(parameters=[WorkflowTermsQuerySerializer], responses=WorkflowTermsSerializer(many=True))
    def list(self, request: Request) -> Response:
        """Every workflow, with its cost and expected duration for the caller's org (`?org=` names one)."""
        org = self._terms_org(request)
        page = self.paginate_queryset(workflows_all()) or []
        return self.get_paginated_response(
            WorkflowTermsSerializer(self.workflow_terms(workflows=page, org=org), many=True).data
        )

    @extend_schema(parameters=[WorkflowTermsQuerySerializer, ETAG], responses=WorkflowTermsSerializer)
    def retrieve(self, request: Request, name: str) -> Response:
        workflow = workflow_get(name=name)
        (terms,) = self.workflow_terms(workflows=[workflow], org=self._terms_org(request))
        return with_etag(Response(WorkflowTermsSerializer(terms).data), workflow)

    def _terms_org(self, request: Request) -> Org | None:
        """The org named by `?org=` (unknown and foreign slugs: the same 400), else the caller's only
        org, else none (staff, or a member of several orgs)."""
        query = WorkflowTermsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        org_ids = visible_org_ids(request)
        slug = query.validated_data.get("org")
        if slug or (org_ids is not None and len(org_ids) == 1):
            return org_for_input(org_ids=org_ids, slug=slug)
        return None

    @extend_schema(request=WorkflowCreateSerializer, responses={201: WorkflowSerializer})
    def create(self, request: Request) -> Response:
        """Staff: register a workflow (a name in use is a 409)."""
        body = WorkflowCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        data["provider"] = provider_for_input(data["provider"])
        workflow = services.workflow_register(actor=actor_of(request), **data)
        return Response(WorkflowSerializer(workflow).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[IF_MATCH, ETAG], request=WorkflowUpdateSerializer, responses=WorkflowSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        """Staff: change any of name, workflow type, task queue, default cost, run timeout (null: the
        deployment's default), provider (null: none) and params; runs started from now on use them."""
        workflow = workflow_get(name=name)
        body = WorkflowUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        if "provider" in data:
            data["provider"] = provider_for_input(data["provider"])
        with transaction.atomic():
            if_match_check(request, lambda: Workflow.objects.select_for_update().get(pk=workflow.pk))
            workflow = services.workflow_change(workflow=workflow, actor=actor_of(request), **data)
        workflow = workflow_get(name=workflow.name)  # as stored, for the ETag a GET will answer
        return with_etag(Response(WorkflowSerializer(workflow).data), workflow)

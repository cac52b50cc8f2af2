"""The layout holds: no import circle between the project's modules, whichever packages they are in;
and each API module sits in the app of the models it serves.

import-linter (`make lint`) checks the layers and the circles inside each package; this checks the whole
graph at once, module by module, so a circle that crosses packages through an ignored layer import is
caught too. A circle is reported with its modules, in import order.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import textwrap
from typing import Any

import grimp
from django.db.models import Model
from rest_framework import serializers, viewsets
from rest_framework.views import APIView

from knobs.models import SchedulerConfig
from orgs.models import Org

PACKAGES = ("common", "orgs", "knobs", "charts", "scheduling", "feed", "fairsched")


def circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively),
    each as one circle through all of its modules where the graph has one, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(imports.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[module] = min(low[module], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components)


def project_imports() -> dict[str, set[str]]:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    return {
        module: {imported for imported in graph.find_modules_directly_imported_by(module) if imported != module}
        for module in graph.modules
    }


def test_circles_finds_a_circle_and_only_it() -> None:
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(imports) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_the_project_modules() -> None:
    assert circles(project_imports()) == []


def served_models(cls: type) -> set[type[Model]]:
    """The models a view or serializer class serves: its bases' generic parameters (`GenericViewSet[Org]`,
    `ListAPIView[ConfigChange]`: DRF drops them at run time, so they are read from the source), the
    model its `get_queryset` returns, and its serializer's or its own `Meta.model`."""
    names = vars(sys.modules[cls.__module__])
    (node,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
    assert isinstance(node, ast.ClassDef)
    typed = [base.slice for base in node.bases if isinstance(base, ast.Subscript)]
    typed += [
        item.returns
        for item in node.body
        if isinstance(item, ast.FunctionDef) and item.name == "get_queryset" and item.returns is not None
    ]
    found = {
        names[name.id]
        for expression in typed
        for name in ast.walk(expression)
        if isinstance(name, ast.Name) and isinstance(names.get(name.id), type) and issubclass(names[name.id], Model)
    }
    for holder in (getattr(cls, "serializer_class", None), cls):
        model = getattr(getattr(holder, "Meta", None), "model", None)
        if isinstance(model, type) and issubclass(model, Model):
            found.add(model)
    return found


def misplaced(module: str, classes: list[type]) -> list[str]:
    """The views and serializers of `module` that serve another app's models, as "module.Class -> app"."""
    app = module.split(".")[0]
    return [
        f"{module}.{cls.__name__} -> {model._meta.app_label}"
        for cls in classes
        if issubclass(cls, APIView | serializers.Serializer)
        for model in sorted(served_models(cls), key=lambda model: model._meta.label)
        if model._meta.app_label != app
    ]


def api_modules() -> list[str]:
    """Every module that shapes the API: `api`, `*_api` and `serializers`, in every package."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    return sorted(
        module
        for module in graph.modules
        if (leaf := module.rsplit(".", 1)[-1]) in {"api", "serializers"} or leaf.endswith("_api")
    )


def test_misplaced_finds_a_view_or_serializer_serving_another_apps_models() -> None:
    class Elsewhere(viewsets.GenericViewSet[Org]):
        pass

    class ConfigShape(serializers.ModelSerializer[Any]):
        class Meta:
            model = SchedulerConfig
            fields = ["budget"]

    assert misplaced("charts.org_api", [Elsewhere, ConfigShape]) == [
        "charts.org_api.Elsewhere -> orgs",
        "charts.org_api.ConfigShape -> knobs",
    ]
    assert misplaced("orgs.org_api", [Elsewhere]) == []


def test_each_api_module_sits_in_the_app_of_its_models() -> None:
    modules = api_modules()
    assert {"orgs.org_api", "orgs.workflow_api", "orgs.api", "knobs.api", "charts.api"} <= set(modules)
    problems = []
    for name in modules:
        module = importlib.import_module(name)
        classes = [cls for _, cls in inspect.getmembers(module, inspect.isclass) if cls.__module__ == name]
        problems += misplaced(name, classes)
    assert problems == []

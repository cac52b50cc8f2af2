"""The layout holds: no import circle between the project's modules, whichever packages they are in.

import-linter (`make lint`) checks the layers and the circles inside each package; this checks the whole
graph at once, module by module, so a circle that crosses packages through an ignored layer import is
caught too. A circle is reported with its modules, in import order.
"""

from __future__ import annotations

import grimp

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

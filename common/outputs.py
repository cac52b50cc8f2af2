"""Serializers that build their output fields once per class instead of once per object.

A DRF `ModelSerializer` builds its fields anew for every instance it is made for: it maps each model
field to a serializer field and deep-copies the declared ones, which cost a chart status read more
than the rest of the serializing (bench/bench_api.py). `OutputFieldsOnce` builds them once per
serializer class, on a prototype, and `to_representation` runs them as DRF's own does, so the output
is the same and the fields are still declared the usual way (a new field is one line in `Meta.fields`,
and the schema reads the same serializer).

Only for output (`to_representation`); validation is untouched. The fields must not read the
serializer's context or parent while representing (plain, source-following fields do not); a
`SerializerMethodField` is the one that does, and its method is called on the serializer at hand, so
`self.context` is the request's.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework import serializers
from rest_framework.fields import Field, SkipField
from rest_framework.relations import PKOnlyObject

OutputField = tuple[str, Field[Any, Any, Any, Any]]


class OutputFieldsOnce(serializers.Serializer[Any]):
    """Mix in before a (Model)Serializer whose output fields need neither context nor parent."""

    _output_fields: ClassVar[dict[type[serializers.Serializer[Any]], list[OutputField]]] = {}

    @classmethod
    def output_fields(cls) -> list[OutputField]:
        """The readable fields of this class with their names, built on a prototype the first time."""
        fields = OutputFieldsOnce._output_fields.get(cls)
        if fields is None:
            fields = [(name, field) for name, field in cls().fields.items() if not field.write_only]
            for name, field in fields:
                if isinstance(field, (serializers.BaseSerializer, serializers.HyperlinkedRelatedField)):
                    raise TypeError(f"{cls.__name__}.{name} reads the context: not for OutputFieldsOnce")
            OutputFieldsOnce._output_fields[cls] = fields
        return fields

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """DRF's `Serializer.to_representation`, over the fields built once."""
        representation: dict[str, Any] = {}
        for name, field in self.output_fields():
            if isinstance(field, serializers.SerializerMethodField):
                representation[name] = getattr(self, field.method_name)(instance)
                continue
            try:
                attribute = field.get_attribute(instance)
            except SkipField:
                continue
            check_for_none = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
            representation[name] = None if check_for_none is None else field.to_representation(attribute)
        return representation

"""The field cut of a part: exactly the rule's top-level fields of an upstream document."""

from __future__ import annotations

import msgspec

from shared.wire import PartFields


class FieldCut:
    """Cuts a part's fields out of an upstream document without building the rest of it:
    the fields are decoded as raw JSON and written back unparsed."""

    def __init__(self, fields: tuple[str, ...]) -> None:
        attributes = [f"f{i}" for i in range(len(fields))]
        self._pairs = list(zip(attributes, fields, strict=True))
        document_type = msgspec.defstruct(
            "PartFields",
            [(name, msgspec.Raw | msgspec.UnsetType, msgspec.UNSET) for name in attributes],
            rename=dict(self._pairs),
        )
        self._decoder = msgspec.json.Decoder(document_type)

    def cut(self, body: bytes) -> PartFields:
        """The fields present in the document; raises msgspec.DecodeError on garbage."""
        document = self._decoder.decode(body)
        present: PartFields = {}
        for attribute, name in self._pairs:
            value = getattr(document, attribute)
            if value is not msgspec.UNSET:
                present[name] = value
        return present

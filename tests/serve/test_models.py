"""serve/models.py: the filters argument the MCP tools share is typed strictly: JSON's true is no year and
the string "3" no topic (a lax model read them as 1 and 3)."""

from __future__ import annotations

import pytest

pydantic = pytest.importorskip("pydantic")

from chitragupta.serve.models import filters_model  # noqa: E402


@pytest.mark.parametrize("bad", [{"year": True}, {"year": False}, {"topic": "3"}, {"topic": True},
                                 {"author": 5}, {"keys": "smith2020"}, {"colour": "red"}])
def test_a_value_of_the_wrong_type_is_refused(bad):
    with pytest.raises(pydantic.ValidationError):
        filters_model(topic=True).model_validate(bad)


def test_the_values_the_filters_take_pass_as_they_are():
    good = {"year": "2015..2020", "author": ["Smith", "Müller"], "keyword": "ocean", "venue": "Nature",
            "type": ["article"], "keys": ["smith2020"], "topic": [1, -1]}
    assert filters_model(topic=True).model_validate(good).model_dump(exclude_none=True) == good
    assert filters_model().model_validate({"year": 2019}).model_dump(exclude_none=True) == {"year": 2019}

"""``export.graph``: array attributes are the ones ``onnx.helper`` makes, byte for byte."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from adaptedge.trainer.export.graph import GraphBuilder, fill_array_attribute

ARRAYS = {
    "ints": np.array([0, -3, 2**40], dtype=np.int64),
    "small_ints": np.array([1, 0, 1], dtype=np.int32),
    "floats32": np.array([0.1, -2.5, 3e38], dtype=np.float32),
    "floats64": np.array([0.1, 1e-300, -7.25]),
    "modes": np.array([b"LEAF", b"BRANCH_LEQ"]),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_an_array_attribute_equals_helpers(name: str) -> None:
    values = ARRAYS[name]
    attr = onnx.AttributeProto()
    fill_array_attribute(attr, name, values)
    assert attr.SerializeToString() == helper.make_attribute(
        name, values.tolist()).SerializeToString()


def test_a_node_with_array_attributes_equals_make_nodes() -> None:
    b = GraphBuilder(3)
    scalars = {"n_targets": 2, "post_transform": "NONE", "base_values": [0.5, -1.0]}
    b.add("TreeEnsembleRegressor", ["x"], ["raw"], domain="ai.onnx.ml", **scalars,
          **ARRAYS, skipped=None)
    expected = helper.make_node("TreeEnsembleRegressor", ["x"], ["raw"], domain="ai.onnx.ml",
                                **scalars, **{k: v.tolist() for k, v in ARRAYS.items()})
    assert b.nodes[0].SerializeToString() == expected.SerializeToString()


@pytest.mark.parametrize("values", [np.zeros((2, 2)), np.zeros(0), np.array(["text"]),
                                    np.array([True, False]),
                                    np.array([None, 1], dtype=object)])
def test_other_arrays_are_refused_by_name(values: np.ndarray) -> None:
    with pytest.raises(ValueError, match="attribute 'bad'"):
        fill_array_attribute(onnx.AttributeProto(), "bad", values)

"""Does an int8 ONNX model compute the same on every x86 CPU? A static check and an AVX2 emulation.

onnxruntime's dynamic quantisation multiplies *unsigned* 8-bit activations (``DynamicQuantizeLinear``)
by the int8 weights of each ``MatMulInteger``. How the CPU does it differs:

* with AVX-512 VNNI / AVX-VNNI (``vpdpbusd``) four u8 x s8 products go straight into an int32;
* with plain AVX2 or AVX-512 without VNNI, MLAS's U8S8 kernels use ``vpmaddubsw``, which adds two
  adjacent u8 x s8 products into a *saturating int16* before widening. With full-range weights
  (|w| up to 127) a pair can reach 2 x 255 x 127 = 64,770 and is clipped to 32,767: the model's
  output changes with the CPU (issue 18: minimum cosine 0.867 on an AMD EPYC with AVX2 only, while
  the same file agreed to 0.99 on a VNNI machine).

Weights kept within :data:`MAX_PORTABLE_INT8` (7 bits, ``quantize_dynamic(reduce_range=True)``) can
never overflow a pair (2 x 255 x 64 = 32,640), and unsigned weights (U8U8) take a kernel that widens
to int16 before multiplying. :func:`int8_weight_violations` checks a file statically;
:func:`emulate_avx2_u8s8` rewrites a quantised graph so that onnxruntime computes, on whatever CPU
runs it, what the AVX2 kernels compute (pairwise products clipped to int16), so a test can compare
that output with PyTorch on a machine that has VNNI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from care.errors import CareError

#: Largest value of an int16 intermediate (``vpmaddubsw`` saturates there) and of an unsigned activation.
INT16_MAX = 32767
INT16_MIN = -32768
UINT8_MAX = 255
#: Largest |weight| for which no pair of u8 x s8 products can exceed INT16_MAX: 32767 // (2 * 255) = 64
#: (onnxruntime's 7-bit ``reduce_range`` grid is [-64, 64]).
MAX_PORTABLE_INT8 = INT16_MAX // (2 * UINT8_MAX)
#: Operators whose second input holds the quantised weights multiplied by u8 activations.
INTEGER_MATMUL_OPS = ("MatMulInteger",)
#: onnxruntime's log severity "error" (0 verbose ... 4 fatal).
ORT_LOG_ERRORS_ONLY = 3


def _load(model: str | Path | Any) -> Any:
    import onnx

    return onnx.load(str(model)) if isinstance(model, (str, Path)) else model


def int8_weight_violations(model: str | Path | Any) -> dict[str, int]:
    """Signed int8 weight tensors of integer MatMuls whose largest |value| exceeds :data:`MAX_PORTABLE_INT8`.

    Args:
        model: path of an ``.onnx`` file or a loaded ``onnx.ModelProto``.
    Returns:
        ``{initializer name: max |value|}`` of every offending tensor; empty when the model is
        saturation-free on AVX2 (unsigned weights never offend: they use the U8U8 kernels).
    """
    from onnx import numpy_helper

    proto = _load(model)
    weights = {init.name: init for init in proto.graph.initializer}
    out: dict[str, int] = {}
    for node in proto.graph.node:
        if node.op_type not in INTEGER_MATMUL_OPS or len(node.input) < 2 or node.input[1] not in weights:
            continue
        values = numpy_helper.to_array(weights[node.input[1]])
        if values.dtype == np.int8:
            peak = int(np.abs(values.astype(np.int32)).max(initial=0))
            if peak > MAX_PORTABLE_INT8:
                out[node.input[1]] = peak
    return out


def emulate_avx2_u8s8(model: str | Path | Any) -> Any:
    """A copy of the quantised graph whose u8 x s8 ``MatMulInteger`` nodes compute what AVX2 computes.

    Each such node ``Y = (A - a_zero) @ B`` (A: u8 activations, B: constant s8 weights with zero
    zero-point) becomes: products of adjacent pairs along K, ``A[2i] * B[2i] + A[2i+1] * B[2i+1]``,
    clipped to [INT16_MIN, INT16_MAX] (``vpmaddubsw``), summed over the pairs, minus
    ``a_zero * sum_k B[k]`` (MLAS's zero-point correction) -- in float64, exact for these integers.
    Nodes with unsigned weights (the U8U8 kernels cannot saturate) are kept as they are.

    Args:
        model: path or ``onnx.ModelProto`` written by ``quantize_dynamic``.
    Returns:
        A new ``onnx.ModelProto`` that onnxruntime runs on any CPU.
    Raises:
        CareError: a weight tensor with an odd inner dimension or a non-zero weight zero-point.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    proto = onnx.ModelProto()
    proto.CopyFrom(_load(model))
    graph = proto.graph
    weights = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    nodes, extra = [], []
    for index, node in enumerate(graph.node):
        b_name = node.input[1] if len(node.input) > 1 else ""
        if node.op_type not in INTEGER_MATMUL_OPS or b_name not in weights or weights[b_name].dtype != np.int8:
            nodes.append(node)
            continue
        b = weights[b_name].astype(np.float64)
        if b.ndim != 2 or b.shape[0] % 2:
            raise CareError(f"AVX2 emulation: weight {b_name} has shape {b.shape}; only 2-D weights with an even "
                            "inner dimension are emulated")
        if len(node.input) > 3 and node.input[3] and np.any(weights.get(node.input[3], 0)):
            raise CareError(f"AVX2 emulation: weight {b_name} has a non-zero zero-point; only symmetric int8 weights "
                            "(quantize_dynamic's QInt8) are emulated")
        p = f"avx2_emu_{index}_"
        extra += [numpy_helper.from_array(b[0::2], p + "b_even"), numpy_helper.from_array(b[1::2], p + "b_odd"),
                  numpy_helper.from_array(b.sum(axis=0), p + "b_colsum"),
                  numpy_helper.from_array(np.array([0], np.int64), p + "start0"),
                  numpy_helper.from_array(np.array([1], np.int64), p + "start1"),
                  numpy_helper.from_array(np.array([np.iinfo(np.int64).max], np.int64), p + "end"),
                  numpy_helper.from_array(np.array([-1], np.int64), p + "axis"),
                  numpy_helper.from_array(np.array([2], np.int64), p + "step"),
                  numpy_helper.from_array(np.array(INT16_MIN, np.float64), p + "lo"),
                  numpy_helper.from_array(np.array(INT16_MAX, np.float64), p + "hi"),
                  numpy_helper.from_array(np.array([-2], np.int64), p + "sum_axis")]
        a = node.input[0]
        nodes += [
            helper.make_node("Cast", [a], [p + "a"], to=TensorProto.DOUBLE),
            helper.make_node("Slice", [p + "a", p + "start0", p + "end", p + "axis", p + "step"], [p + "a_even"]),
            helper.make_node("Slice", [p + "a", p + "start1", p + "end", p + "axis", p + "step"], [p + "a_odd"]),
            helper.make_node("Unsqueeze", [p + "a_even", p + "axis"], [p + "a_even_col"]),
            helper.make_node("Unsqueeze", [p + "a_odd", p + "axis"], [p + "a_odd_col"]),
            helper.make_node("Mul", [p + "a_even_col", p + "b_even"], [p + "prod_even"]),
            helper.make_node("Mul", [p + "a_odd_col", p + "b_odd"], [p + "prod_odd"]),
            helper.make_node("Add", [p + "prod_even", p + "prod_odd"], [p + "pairs"]),
            helper.make_node("Clip", [p + "pairs", p + "lo", p + "hi"], [p + "pairs_int16"]),
            helper.make_node("ReduceSum", [p + "pairs_int16", p + "sum_axis"], [p + "raw"], keepdims=0),
        ]
        if len(node.input) > 2 and node.input[2]:
            nodes += [helper.make_node("Cast", [node.input[2]], [p + "a_zero"], to=TensorProto.DOUBLE),
                      helper.make_node("Mul", [p + "a_zero", p + "b_colsum"], [p + "offset"]),
                      helper.make_node("Sub", [p + "raw", p + "offset"], [p + "acc"])]
        else:
            nodes.append(helper.make_node("Identity", [p + "raw"], [p + "acc"]))
        nodes.append(helper.make_node("Cast", [p + "acc"], [node.output[0]], to=TensorProto.INT32))
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(extra)
    return proto


def run_onnx(model: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """First output of ``model`` (an ``onnx.ModelProto``) on ``feeds``, with onnxruntime's CPU provider."""
    return session_for(model).run(None, feeds)[0]


def session_for(model: Any, *, threads: int = 0) -> Any:
    """An onnxruntime CPU session for an in-memory ``onnx.ModelProto`` (warnings about unused
    initializers, which the emulation leaves behind, are not logged)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = ORT_LOG_ERRORS_ONLY
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

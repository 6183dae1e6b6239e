#!/usr/bin/python3
"""Writes the demo model: a small image classifier (Conv/BN/Relu/MaxPool/Gemm/Softmax, opset 17)
with fixed pseudo-random weights, and one input image as .npy. Made with python3-onnx so the
project needs no downloaded model."""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(rng):
    def weight(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        weight("conv1.w", (8, 3, 3, 3), 0.2), weight("conv1.b", (8,), 0.1),
        numpy_helper.from_array(np.abs(rng.standard_normal(8)).astype(np.float32) + 0.5, "bn1.scale"),
        weight("bn1.bias", (8,), 0.1), weight("bn1.mean", (8,), 0.1),
        numpy_helper.from_array(np.abs(rng.standard_normal(8)).astype(np.float32) + 0.5, "bn1.var"),
        weight("conv2.w", (16, 8, 3, 3), 0.1), weight("conv2.b", (16,), 0.1),
        weight("fc.w", (10, 16), 0.3), weight("fc.b", (10,), 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"], ["b1"], name="bn1"),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "demo_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="edgert-demo")
    onnx.checker.check_model(model)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", required=True, help="ONNX file to write")
    parser.add_argument("--input", required=True, help=".npy input image to write")
    parser.add_argument("--seed", type=int, default=2026, help="weights seed: another seed, another (distinguishable) model")
    args = parser.parse_args()
    rng = np.random.RandomState(args.seed)
    onnx.save(build(rng), args.output)
    np.save(args.input, rng.standard_normal((1, 3, 32, 32)).astype(np.float32))
    print(f"wrote {args.output} and {args.input}")


if __name__ == "__main__":
    main()

"""The edgert Python package against the edgert CLI and ONNX Runtime's outputs: building through
the same library gives the same engine, running gives the same outputs bit for bit."""
import json
import os

import numpy as np
import pytest

import edgert
from conftest import run_cli


def cli_outputs(engine, name, array, work):
    np.save(work / "in.npy", array)
    run_cli("run", engine, "--input", f"{name}={work / 'in.npy'}", "--npy", "--output-dir", work / "out", "-q")
    return {f[:-4]: np.load(work / "out" / f) for f in os.listdir(work / "out")}


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / max(np.linalg.norm(b.astype(np.float64)), 1e-30))


def test_a_zoo_model_builds_and_runs_as_the_cli_does(zoo, tmp_path):
    folder, models = zoo
    entry = models["resnet18"]
    model = os.path.join(folder, entry["file"])
    # Tactics as listed (untimed): both builds then pick the same kernels, so the engines match.
    built = edgert.build(model, tactics="first", output=tmp_path / "py.engine")
    run_cli("build", model, "--tactics", "first", "-o", tmp_path / "cli.engine")
    assert built.data == (tmp_path / "cli.engine").read_bytes()
    assert built.report["nodes"] > 0 and built.report["bytes"] == len(built.data)

    engine = edgert.Engine(tmp_path / "py.engine")
    name = engine.inputs[0]["name"]
    x = np.load(os.path.join(folder, entry["inputs"][0]["sample"]))
    ours = engine.context().run({name: x})
    theirs = cli_outputs(tmp_path / "cli.engine", name, x, tmp_path)
    for output in entry["outputs"]:
        assert np.array_equal(ours[output["name"]], theirs[output["name"]])
        expected = np.load(os.path.join(folder, entry["expected_dir"], output["name"] + ".npy"))
        assert rel_l2(ours[output["name"]], expected) < 1e-4  # ONNX Runtime's output


def test_a_dynamic_engine_runs_at_two_shapes_of_its_profile(zoo, tmp_path):
    folder, models = zoo
    entry = models["mobilenet_v2_dynamic"]
    spec = entry["inputs"][0]
    built = edgert.build(os.path.join(folder, entry["file"]), min_shapes={spec["name"]: spec["min_shape"]},
                         opt_shapes={spec["name"]: spec["opt_shape"]}, max_shapes={spec["name"]: spec["max_shape"]})
    engine = built.load()
    (profile,) = engine.inputs[0]["profiles"]
    assert (profile["min"], profile["max"]) == (spec["min_shape"], spec["max_shape"])
    assert engine.inputs[0]["shape"][2:] == [None, None]
    context = engine.context()
    sample = np.load(os.path.join(folder, spec["sample"]))
    logits = context.run({spec["name"]: sample})[entry["outputs"][0]["name"]]
    expected = np.load(os.path.join(folder, entry["expected_dir"], entry["outputs"][0]["name"] + ".npy"))
    assert rel_l2(logits, expected) < 1e-4
    # The same context at another shape, then the first again: each run at its own shape.
    smaller = np.ascontiguousarray(sample[:, :, :96, :128])
    (small,) = context.run(None, {spec["name"]: smaller})
    assert small.shape == (1, 1000) and not np.allclose(small, logits)
    assert np.array_equal(small, cli_outputs(built_path(built, tmp_path), spec["name"], smaller, tmp_path)["logits"])
    assert np.array_equal(context.run({spec["name"]: sample})["logits"], logits)
    with pytest.raises(edgert.EdgertError) as refused:
        context.run({spec["name"]: np.zeros((1, 3, 64, 64), np.float32)})
    assert spec["name"] in str(refused.value) and refused.value.status == "shape"


def built_path(built, tmp_path):
    path = tmp_path / "built.engine"
    built.save(path)
    return path


def digits_training_batches(count):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    x_train, _, _, _ = train_test_split(x, digits.target, test_size=0.25, random_state=0, stratify=digits.target)
    return [x_train[16 * i:16 * (i + 1)] for i in range(count)]


def test_int8_calibrates_from_a_python_iterable_as_from_a_directory(zoo, tmp_path):
    folder, models = zoo
    entry = models["digits_cnn"]
    model = os.path.join(folder, entry["file"])
    batches = digits_training_batches(8)
    name = entry["inputs"][0]["name"]
    # A generator: iterated once, during the build.
    built = edgert.build(model, int8=True, calib=({name: b} for b in batches), tactics="first")
    assert built.report["calibration"]["samples"] == 8
    (tmp_path / "calib").mkdir()
    for i, b in enumerate(batches):
        np.save(tmp_path / "calib" / f"{i:03d}.npy", b)
    run_cli("build", model, "--int8", "--calib", tmp_path / "calib", "--tactics", "first", "-o", tmp_path / "cli.engine")
    assert built.data == (tmp_path / "cli.engine").read_bytes()

    test_x = np.load(os.path.join(folder, entry["test_x"])).astype(np.float32)
    test_y = np.load(os.path.join(folder, entry["test_y"]))
    float32 = edgert.build(model, tactics="first").load()
    accuracy = {}
    for tag, engine in (("float32", float32), ("int8", built.load())):
        logits = engine.context().run({name: test_x})["logits"]
        accuracy[tag] = float((logits.argmax(axis=1) == test_y).mean())
    assert accuracy["float32"] - accuracy["int8"] <= 0.005, accuracy


def test_a_calibration_source_that_fails_ends_the_build_with_its_message(zoo):
    folder, models = zoo
    entry = models["digits_cnn"]

    def broken():
        yield np.zeros((16, 1, 8, 8), np.float32)
        raise ValueError("camera unplugged")

    with pytest.raises(edgert.EdgertError, match="camera unplugged"):
        edgert.build(os.path.join(folder, entry["file"]), int8=True, calib=broken())


def test_tensors_cross_through_dlpack_without_copies(demo_model):
    torch = pytest.importorskip("torch")
    model, x = demo_model
    engine = edgert.build(model).load()
    name, output = engine.inputs[0]["name"], engine.outputs[0]["name"]
    context = engine.context()
    expected = context.run({name: x})[output]
    # In: a torch tensor, read through __dlpack__.
    from_torch = context.run({name: torch.from_numpy(x.copy())})[output]
    assert np.array_equal(from_torch, expected)
    # Out: the NumPy result into torch, sharing its memory.
    tensor = torch.from_dlpack(from_torch)
    assert tensor.data_ptr() == from_torch.ctypes.data and torch.equal(tensor, torch.from_numpy(expected))
    # Written in place into a caller's torch tensor (the binding path).
    target = torch.zeros(engine.outputs[0]["shape"], dtype=torch.float32)
    result = context.run({name: x}, outputs={output: target})
    assert result[output] is target and np.array_equal(target.numpy(), expected)
    # A strided view is refused with a message, not read wrongly.
    strided = torch.from_numpy(np.ascontiguousarray(np.concatenate([x, x], axis=3)))[:, :, :, ::2]
    with pytest.raises(edgert.EdgertError, match="row-major"):
        context.run({name: strided})


def test_numpy_inputs_that_are_not_contiguous_are_read_correctly(demo_model):
    model, x = demo_model
    context = edgert.build(model).load().context()
    wide = np.zeros(x.shape[:3] + (2 * x.shape[3],), np.float32)
    wide[..., ::2] = x
    assert not wide[..., ::2].flags.c_contiguous
    assert np.array_equal(context.run({"input": wide[..., ::2]})["probabilities"],
                          context.run({"input": x})["probabilities"])


def test_inspect_is_the_clis_json(demo_model, tmp_path):
    model, _ = demo_model
    edgert.build(model, output=tmp_path / "demo.engine")
    assert edgert.Engine(tmp_path / "demo.engine").inspect() == json.loads(run_cli("inspect", "--json", tmp_path / "demo.engine"))


def test_onnx_runtime_style_run_returns_the_named_outputs_in_order(demo_model):
    model, x = demo_model
    context = edgert.build(model).load().context()
    (probabilities,) = context.run(["probabilities"], {"input": x})
    assert probabilities.shape == (1, 10)
    with pytest.raises(edgert.EdgertError, match="no output named 'logits'"):
        context.run(["logits"], {"input": x})


def test_bad_input_is_an_edgert_error_that_says_what_and_where(demo_model, tmp_path):
    model, x = demo_model
    with pytest.raises(edgert.EdgertError, match="no build option 'fp17'"):
        edgert.build(model, fp17=True)
    with pytest.raises(edgert.EdgertError, match="nowhere.onnx"):
        edgert.build(tmp_path / "nowhere.onnx")
    built = edgert.build(model)
    (tmp_path / "half.engine").write_bytes(built.data[: len(built.data) // 2])
    with pytest.raises(edgert.EdgertError, match="half.engine") as truncated:
        edgert.Engine(tmp_path / "half.engine")
    assert truncated.value.status in ("format", "checksum", "io")
    context = built.load().context()
    with pytest.raises(edgert.EdgertError, match="'input' is missing"):
        context.run({})
    with pytest.raises(edgert.EdgertError, match="'image', which is not an input"):
        context.run({"input": x, "image": x})
    with pytest.raises(edgert.EdgertError, match="input") as wrong:
        context.run({"input": x.astype(np.float64)})
    assert wrong.value.status == "shape"
    with pytest.raises(edgert.EdgertError, match="board 'no-such-board'|no-such-board"):
        edgert.build(model, board="no-such-board")

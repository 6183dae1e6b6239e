#!/usr/bin/python3
"""The GStreamer element edgertinfer (services/gstreamer) driven by gst-launch-1.0 -m, whose bus
messages it parses (no Python GStreamer bindings needed).

  gst_element_test.py BUILD_DIR SOURCE_DIR CASE

CASE is one of:
  engines         builds the test engines into BUILD_DIR/gst-work (the other cases' fixture)
  stream          videotestsrc num-buffers=100 ! videoconvert ! edgertinfer ! fakesink: 100
                  frames, exactly one message each (frames 0-99, rising pts), parseable JSON whose
                  outputs have the engine's names and shapes and, for frames 0, 1, 50 and 99,
                  its values (edgert run on a numpy reference of the preprocessing, below)
  reference_rgb   one frame (RGB, NV12 or YUY2, at a width whose rows are padded) against a numpy
  reference_nv12  reference of edgertd's preprocessing (BT.601 integer YUV, half-pixel bilinear,
  reference_yuy2  mean/std, BGR order) run by `edgert run`: the element's output values match
  camera_engine   an engine built with --camera nv12:320x240: videoconvert is asked for NV12 and
                  the results equal the float engine's on the same frames
  missing_engine  a missing engine file fails the pipeline with an error naming the path
  bad_engine      a file that is not an engine fails with libedgert's message and the path
  non_image       an engine whose input is no image fails, naming the input and its shape

The build's plugin directory reaches libedgert as EDGERT_PLUGIN_PATH (stream, camera_engine) or
as the element's plugin-dir property (reference_*); GST_PLUGIN_PATH is the build's
lib/gstreamer-1.0, GST_REGISTRY a file in the work directory. Caps a camera engine cannot take
fail from the streaming thread during preroll, which gst-launch-1.0 can miss: that case is
checked on the bus in edgert_infer_meta_test.cpp.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

build, source, case = sys.argv[1], sys.argv[2], sys.argv[3]
edgert = os.path.join(build, "bin", "edgert")
plugin_dir = os.path.join(build, "lib", "edgert", "plugins")
engines = os.path.join(build, "gst-work")
BOARD = "x86_64-generic"
MEAN, STD = "0.485,0.456,0.406", "0.229,0.224,0.225"
failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(what)


def engine(name):
    return os.path.join(engines, name + ".engine")


def build_engines():
    os.makedirs(engines, exist_ok=True)
    model = os.path.join(engines, "demo.onnx")
    subprocess.run([sys.executable, os.path.join(source, "tests/models/make_demo_model.py"), "--output", model,
                    "--input", os.path.join(engines, "demo.npy")], check=True, capture_output=True)
    for name, extra in [("demo", []),
                        ("camera_nv12_320x240", ["--camera", "nv12:320x240", "--camera-mean", MEAN, "--camera-std", STD]),
                        ("camera_yuyv_322x240", ["--camera", "yuyv:322x240", "--camera-mean", MEAN, "--camera-std", STD])]:
        subprocess.run([edgert, "build", "--board", BOARD, model, "-o", engine(name), *extra], check=True,
                       capture_output=True)
    # An engine whose one input is a [1, 16] vector: no image layout fits it.
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    weights = numpy_helper.from_array(np.ones((16, 4), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["features", "w"], ["scores"])], "vector",
                              [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 4])], [weights])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              os.path.join(engines, "vector.onnx"))
    subprocess.run([edgert, "build", "--board", BOARD, os.path.join(engines, "vector.onnx"), "-o", engine("vector")],
                   check=True, capture_output=True)
    print("built", sorted(os.listdir(engines)))


def gst_env(with_plugin_path):
    env = dict(os.environ)
    env["GST_PLUGIN_PATH"] = os.path.join(build, "lib", "gstreamer-1.0")
    env["GST_REGISTRY"] = os.path.join(work, "registry.bin")
    env.pop("EDGERT_PLUGIN_PATH", None)
    if with_plugin_path:
        env["EDGERT_PLUGIN_PATH"] = plugin_dir
    return env


def gst_launch(pipeline, with_plugin_path=True):
    """Runs gst-launch-1.0 -m; returns (exit status, output, the edgertinfer messages' fields)."""
    run = subprocess.run(["gst-launch-1.0", "-m", *pipeline.split()], env=gst_env(with_plugin_path),
                         capture_output=True, text=True, timeout=240)
    output = run.stdout + run.stderr
    messages = [parse_structure(line) for line in output.splitlines()
                if re.match(r'Got message #\d+ from element "[^"]*" \(element\): edgertinfer,', line)]
    return run.returncode, output, messages


def unescape(text):
    """A GStreamer-serialized string's contents: \\ooo octal bytes, \\c the character c."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "\\":
            if re.match(r"[0-7]{3}", text[i + 1:i + 4]):
                out.append(int(text[i + 1:i + 4], 8))
                i += 4
                continue
            i += 1
        out += text[i].encode()
        i += 1
    return out.decode()


def parse_structure(line):
    body = line.split("(element): edgertinfer,", 1)[1]
    fields = {}
    for m in re.finditer(r'\s*([\w-]+)=\((\w+)\)("(?:[^"\\]|\\.)*"|[^,;]*)[,;]', body):
        name, kind, value = m.groups()
        if kind == "string":
            fields[name] = unescape(value[1:-1]) if value.startswith('"') else value
        elif kind == "double":
            fields[name] = float(value)
        else:
            fields[name] = int(value)
    return fields


def edgert_outputs(input_array):
    """The demo engine's outputs for `input_array` by `edgert run`: name -> array."""
    # C order: a transposed array would be saved in Fortran order, which edgert run refuses.
    np.save(os.path.join(work, "input.npy"), np.ascontiguousarray(input_array, np.float32))
    out = os.path.join(work, "outputs")
    run = subprocess.run([edgert, "run", engine("demo"), "--input", f"input={work}/input.npy", "--npy", "--output-dir",
                          out], capture_output=True, text=True, env={**os.environ, "EDGERT_PLUGIN_PATH": plugin_dir})
    if run.returncode != 0:
        raise RuntimeError(f"edgert run failed: {run.stdout}{run.stderr}")
    return {f[:-4]: np.load(os.path.join(out, f)) for f in sorted(os.listdir(out)) if f.endswith(".npy")}


def raw_outputs(message):
    result = json.loads(message["json"])["result"]
    assert result["type"] == "raw", result
    return result["outputs"]


# --- a numpy reference of edgertd's preprocessing (plugins/common/camera_frame.h), written apart
def round_up_4(n):
    return (n + 3) // 4 * 4


def frame_rgb(data, fmt, width, height):
    """RGB int image of a raw frame file as GStreamer lays it out (rows padded to 4 bytes)."""
    buf = np.frombuffer(data, np.uint8)
    if fmt == "RGB":
        stride = round_up_4(width * 3)
        return buf[:stride * height].reshape(height, stride)[:, :width * 3].reshape(height, width, 3).astype(np.int64)
    if fmt == "YUY2":
        stride = round_up_4(width * 2)
        rows = buf[:stride * height].reshape(height, stride)[:, :width * 2].astype(np.int64)
        y = rows[:, 0::2]
        u = np.repeat(rows[:, 1::4], 2, axis=1)
        v = np.repeat(rows[:, 3::4], 2, axis=1)
    else:  # NV12
        stride = round_up_4(width)
        y = buf[:stride * height].reshape(height, stride)[:, :width].astype(np.int64)
        uv = buf[stride * height:stride * height + stride * height // 2].reshape(height // 2, stride)[:, :width]
        u = np.repeat(np.repeat(uv[:, 0::2].astype(np.int64), 2, axis=0), 2, axis=1)
        v = np.repeat(np.repeat(uv[:, 1::2].astype(np.int64), 2, axis=0), 2, axis=1)
    c, d, e = (y - 16) * 1192, u - 128, v - 128
    rgb = [(c + 1634 * e + 512) >> 10, (c - 401 * d - 833 * e + 512) >> 10, (c + 2066 * d + 512) >> 10]
    return np.clip(np.stack(rgb, axis=-1), 0, 255)


def bilinear_sources(out_size, in_size):
    o = np.arange(out_size, dtype=np.float32)
    s = np.maximum((o + np.float32(0.5)) * np.float32(in_size) / np.float32(out_size) - np.float32(0.5), 0)
    i0 = np.minimum(s.astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    w = ((s - i0.astype(np.float32)) * 1024).astype(np.int64)
    return i0, i1, w


def preprocess(rgb, out_w, out_h, mean, std, bgr):
    x0, x1, wx = bilinear_sources(out_w, rgb.shape[1])
    y0, y1, wy = bilinear_sources(out_h, rgb.shape[0])
    wx, wy = wx[None, :, None], wy[:, None, None]
    top = rgb[y0][:, x0] * (1024 - wx) + rgb[y0][:, x1] * wx
    bottom = rgb[y1][:, x0] * (1024 - wx) + rgb[y1][:, x1] * wx
    value = (top * (1024 - wy) + bottom * wy) / (1024.0 * 1024.0)
    if bgr:
        value = value[..., ::-1]
    value = (value / 255.0 - np.array(mean)) / np.array(std)
    return value.transpose(2, 0, 1)[None].astype(np.float32)  # NCHW, as the demo model takes


def case_stream():
    status, output, messages = gst_launch(
        f"videotestsrc num-buffers=100 ! videoconvert ! edgertinfer engine={engine('demo')} ! fakesink")
    check("gst-launch exits 0 after EOS", status == 0 and "Got EOS from element" in output, output[-2000:])
    frames = [m.get("frame") for m in messages]
    check("exactly 100 edgertinfer messages, frames 0-99 once each", frames == list(range(100)), f"{frames[:5]}... ({len(frames)})")
    pts = [m.get("pts") for m in messages]
    check("pts rise frame by frame", all(a < b for a, b in zip(pts, pts[1:])), str(pts[:5]))
    check("every message has latency-us > 0", all(m.get("latency-us", 0) > 0 for m in messages))
    parsed = []
    for m in messages:
        try:
            parsed.append(json.loads(m["json"]))
        except (KeyError, ValueError) as e:
            check(f"frame {m.get('frame')}: json parses", False, str(e))
    check("every message's json parses", len(parsed) == 100)
    if not parsed:
        return
    check("json frame equals the message's", all(p["frame"] == m["frame"] for p, m in zip(parsed, messages)))
    reference = edgert_outputs(np.zeros((1, 3, 32, 32), np.float32))
    for p in parsed:
        outputs = p["result"]["outputs"]
        names = [o["name"] for o in outputs]
        shapes = [o["shape"] for o in outputs]
        if names != list(reference) or shapes != [list(a.shape) for a in reference.values()]:
            check(f"frame {p['frame']}: outputs as the engine's (edgert run)", False,
                  f"{names} {shapes} vs {list(reference)} {[a.shape for a in reference.values()]}")
            break
    else:
        check("every frame's outputs have the engine's names and shapes", True)
    check("every frame's probabilities sum to 1",
          all(abs(sum(p["result"]["outputs"][0]["values"]) - 1) < 1e-4 for p in parsed))
    # The pattern's lower part changes from frame to frame, the same in every run: the frames as
    # videoconvert gave them to the element, written to a file, are the reference's input.
    image = parsed[0]["image"]
    fmt, width, height = image["format"], image["width"], image["height"]
    frames_file = os.path.join(work, "frames.raw")
    status, output, _ = gst_launch(f"videotestsrc num-buffers=100 ! videoconvert ! "
                                   f"video/x-raw,format={fmt},width={width},height={height} ! filesink location={frames_file}")
    with open(frames_file, "rb") as f:
        data = f.read()
    check("the reference frames were written", status == 0 and len(data) % 100 == 0, output[-1000:])
    size = len(data) // 100
    for n in (0, 1, 50, 99):
        compare_with_reference(f"frame {n} ({fmt} {width}x{height})", data[n * size:(n + 1) * size], fmt, width, height,
                               messages[n], [0, 0, 0], [1, 1, 1], bgr=False)


def compare_with_reference(what, frame_bytes, fmt, width, height, message, mean, std, bgr):
    """The element's outputs in `message` against `edgert run` on the numpy-preprocessed frame."""
    expected = edgert_outputs(preprocess(frame_rgb(frame_bytes, fmt, width, height), 32, 32, mean, std, bgr))
    for o in raw_outputs(message):
        want = expected[o["name"]].reshape(-1)[:len(o["values"])]
        error = float(np.max(np.abs(np.array(o["values"]) - want)))
        check(f"{what}: output '{o['name']}' matches edgert run on the numpy-preprocessed frame (max |error| {error:.2e})",
              error < 1e-4, f"{o['values']} vs {want.tolist()}")


def case_reference(fmt):
    width, height = 318, 240  # RGB rows of 954 bytes padded to 956, NV12 luma 318 to 320
    caps = f"video/x-raw,format={fmt},width={width},height={height}"
    frame_file = os.path.join(work, "frame.raw")
    status, output, _ = gst_launch(f"videotestsrc num-buffers=1 ! {caps} ! filesink location={frame_file}")
    check(f"{fmt} frame written", status == 0, output[-1000:])
    status, output, messages = gst_launch(
        f"videotestsrc num-buffers=2 ! {caps} ! edgertinfer engine={engine('demo')} plugin-dir={plugin_dir} "
        f"mean={MEAN} std={STD} channel-order=bgr ! fakesink", with_plugin_path=False)
    check(f"{fmt}: gst-launch with plugin-dir exits 0, 2 messages", status == 0 and len(messages) == 2, output[-2000:])
    if len(messages) != 2:
        return
    mean, std = [float(v) for v in MEAN.split(",")], [float(v) for v in STD.split(",")]
    # channel-order=bgr: the model's channel c gets the frame's channel 2 - c, normalized with mean[c], std[c].
    with open(frame_file, "rb") as f:
        compare_with_reference(fmt, f.read(), fmt, width, height, messages[0], mean, std, bgr=True)
    check(f"{fmt}: json names the format and size",
          json.loads(messages[0]["json"])["image"] == {"format": fmt, "width": width, "height": height},
          messages[0]["json"][:300])


def case_camera_engine():
    pipeline = "videotestsrc num-buffers=3 ! videoconvert ! edgertinfer engine={} mean={} std={} ! fakesink"
    status, output, camera = gst_launch(pipeline.format(engine("camera_nv12_320x240"), MEAN, STD))
    check("camera engine: 3 messages", status == 0 and len(camera) == 3, output[-2000:])
    status, output, plain = gst_launch(
        "videotestsrc num-buffers=3 ! video/x-raw,format=NV12 ! "
        + pipeline.format(engine("demo"), MEAN, STD).split("! ", 1)[1])
    check("float engine on NV12: 3 messages", status == 0 and len(plain) == 3, output[-2000:])
    if len(camera) != 3 or len(plain) != 3:
        return
    check("videoconvert was asked for the camera engine's NV12",
          json.loads(camera[0]["json"])["image"]["format"] == "NV12", camera[0]["json"][:300])
    a, b = raw_outputs(camera[0])[0]["values"], raw_outputs(plain[0])[0]["values"]
    check("camera engine's outputs equal the float engine's after edgertd's preprocessing",
          np.allclose(a, b, atol=1e-5), f"{a} vs {b}")


def expect_failure(what, pipeline, *needles):
    status, output, messages = gst_launch(pipeline)
    check(f"{what}: gst-launch fails", status != 0, output[-1500:])
    check(f"{what}: no frame processed", not messages)
    error_lines = [line for line in output.splitlines() if "ERROR" in line or "Additional debug info" in line]
    for needle in needles:
        check(f"{what}: the error says '{needle}'", any(needle in line for line in error_lines), output[-1500:])
    print("\n".join(error_lines[:3]))


def case_missing_engine():
    path = os.path.join(work, "no-such-dir", "missing.engine")
    expect_failure("missing engine", f"videotestsrc num-buffers=5 ! videoconvert ! edgertinfer engine={path} ! fakesink",
                   path, "edgertinfer")
    expect_failure("no engine property", "videotestsrc num-buffers=5 ! videoconvert ! edgertinfer ! fakesink",
                   "no engine: set the engine property")


def case_bad_engine():
    path = os.path.join(engines, "demo.onnx")  # an ONNX model, not an engine
    expect_failure("not an engine", f"videotestsrc num-buffers=5 ! videoconvert ! edgertinfer engine={path} ! fakesink",
                   path)


def case_non_image():
    expect_failure("vector input", f"videotestsrc num-buffers=5 ! videoconvert ! edgertinfer engine={engine('vector')} ! fakesink",
                   "input 'features' [1, 16]", "4-D image tensor")


if case == "engines":
    build_engines()
    sys.exit(0)
work = tempfile.mkdtemp(prefix=f"edgert-gst-{case}-")
cases = {"stream": case_stream, "camera_engine": case_camera_engine, "missing_engine": case_missing_engine,
         "bad_engine": case_bad_engine, "non_image": case_non_image,
         "reference_rgb": lambda: case_reference("RGB"), "reference_nv12": lambda: case_reference("NV12"),
         "reference_yuy2": lambda: case_reference("YUY2")}
cases[case]()
if failures:
    print(f"{len(failures)} check(s) failed: {failures}")
    sys.exit(1)
print("all checks passed")

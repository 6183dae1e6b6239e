"""edgert: build engines from ONNX models for a board, load them and run them.

    import edgert, numpy as np
    built = edgert.build("model.onnx", board="native", fp16=True)
    built.save("model.engine")
    engine = edgert.Engine("model.engine")
    outputs = engine.context().run({"input": np.zeros((1, 3, 224, 224), np.float32)})

Building goes through libedgert-builder and running through libedgert, the same libraries the
`edgert` command uses, so an engine built here is the one `edgert build` makes with the same
options, and runs give the same outputs bit for bit.
"""

import json
import os

__all__ = ["EdgertError", "Builder", "BuiltEngine", "Engine", "Context", "build", "version"]


class EdgertError(RuntimeError):
    """What edgert refused or failed at. `status` is edgert's status code by name, EDGERT_ERR_
    left off and in lower case ("invalid_argument", "shape", "format", "plugin", "io", ...); the
    message says what failed and where."""

    def __init__(self, message, status="internal"):
        super().__init__(message)
        self.status = status


from . import _edgert  # noqa: E402  (EdgertError must exist before errors can be raised)


def version():
    return _edgert.version()


def _shape_spec(shapes):
    """{"x": (1, 3, 224, 224)} -> "x:1x3x224x224" (edgert build's --min-shapes syntax)."""
    return ",".join(name + ":" + "x".join(str(int(d)) for d in dims) for name, dims in shapes.items())


def _option_text(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class BuiltEngine:
    """An engine a build made: its bytes, the build's report, and a way to save or load it."""

    def __init__(self, built):
        self._built = built

    @property
    def data(self):
        """The engine file's bytes."""
        return self._built.data

    @property
    def report(self):
        """What the build did, as a dict (edgert_built_engine_report in edgert/builder.h)."""
        return json.loads(self._built.report)

    def save(self, path):
        """Writes the engine file atomically (a reader never sees half of it)."""
        self._built.save(os.fspath(path))

    def load(self, **options):
        """The engine, loaded to run here."""
        return Engine.from_bytes(self.data, **options)


class Builder:
    """Finer control over a build, as TensorRT's Builder and BuilderConfig.

    Options carry `edgert build`'s long flag names, dashes or underscores alike:
    builder.set("timing_cache", "cache.db"); builder.set("no_gpu", True).
    """

    def __init__(self, model):
        self._builder = _edgert.Builder(os.fspath(model))
        self._calibration = None

    def set(self, name, value):
        self._builder.set(name.replace("_", "-"), _option_text(value))
        return self

    def add_profile(self, min_shapes, opt_shapes, max_shapes):
        """One optimization profile: {input name: shape} at its minimum, optimum and maximum."""
        for flag, shapes in (("min-shapes", min_shapes), ("opt-shapes", opt_shapes), ("max-shapes", max_shapes)):
            self._builder.set(flag, _shape_spec(shapes))
        return self

    def calibrate_with(self, samples):
        """INT8 calibration inputs: an iterable of feeds (a dict of input name -> array, or one
        array for a model with one input), iterated once during build()."""
        self._calibration = samples
        self._builder.set_calibration(samples)
        return self

    def log_to(self, log):
        """A callable taking each progress line (what `edgert build -v` prints)."""
        self._builder.set_log(log)
        return self

    def build(self):
        return BuiltEngine(self._builder.build())


def build(model, board="native", fp16=False, int8=False, calib=None, min_shapes=None, opt_shapes=None,
          max_shapes=None, output=None, log=None, **options):
    """Builds `model` (an ONNX file) for `board` and returns a BuiltEngine (saved to `output`
    when given).

    calib: INT8 calibration inputs, an iterable of feeds or a directory of .npy files.
    min_shapes/opt_shapes/max_shapes: {input: shape} for a dynamic input's profile, or lists of
    such dicts, one per profile. Other options by `edgert build`'s long flag names, e.g.
    timing_cache="cache.db", calibrator="minmax", no_gpu=True.
    """
    builder = Builder(model).set("board", board)
    if fp16:
        builder.set("fp16", True)
    if int8:
        builder.set("int8", True)
    if isinstance(calib, (str, os.PathLike)):
        builder.set("calib", os.fspath(calib))
    elif calib is not None:
        builder.calibrate_with(calib)
    profiles = [min_shapes, opt_shapes, max_shapes]
    if any(p is not None for p in profiles):
        if any(p is None for p in profiles):
            raise EdgertError("min_shapes, opt_shapes and max_shapes go together", "invalid_argument")
        lists = [p if isinstance(p, (list, tuple)) else [p] for p in profiles]
        if len({len(p) for p in lists}) != 1:
            raise EdgertError("min_shapes, opt_shapes and max_shapes must name as many profiles",
                              "invalid_argument")
        for lo, opt, hi in zip(*lists):
            builder.add_profile(lo, opt, hi)
    for name, value in options.items():
        builder.set(name, value)
    if log is not None:
        builder.log_to(log)
    built = builder.build()
    if output is not None:
        built.save(output)
    return built


class Context:
    """The mutable state of one run at a time, like TensorRT's execution context: one per thread
    that runs the engine."""

    def __init__(self, engine):
        self._engine = engine
        self._context = _edgert.Context(engine._engine)
        self._output_names = [o["name"] for o in engine.outputs]

    def run(self, output_names_or_feed, feed=None, outputs=None, stream=None):
        """run({name: array}) -> {name: numpy array}: inputs are read in place when they are
        C-contiguous NumPy arrays or DLPack tensors (torch, CuPy), never copied.

        run(output_names, feed) -> [arrays], as ONNX Runtime's InferenceSession.run (None: all).
        outputs: {name: array} written in place (host or, through DLPack, device memory);
        needed for outputs of an engine with a device when the inputs are device arrays.
        stream: with device tensors, the CUDA stream (a handle, e.g. torch.cuda.Stream's
        cuda_stream) the run is ordered on; None: the legacy default stream, torch's and CuPy's
        default. The run has finished when run() returns.
        """
        if isinstance(output_names_or_feed, dict) and feed is None:
            return self._context.run(output_names_or_feed, outputs, stream)
        names = output_names_or_feed or self._output_names
        result = self._context.run(feed, outputs, stream)
        missing = [n for n in names if n not in result]
        if missing:
            raise EdgertError("no output named %s; the engine's outputs: %s" % (", ".join(map(repr, missing)),
                              ", ".join(map(repr, self._output_names))), "invalid_argument")
        return [result[n] for n in names]


class Engine:
    """An engine file mapped and verified, its plugins loaded. Immutable: share it between
    threads, with a Context per thread."""

    def __init__(self, path, plugin_path=None, num_threads=0, allow_board_mismatch=False):
        self._path = os.fspath(path)
        self._engine = _edgert.Engine(self._path, plugin_path or "", num_threads, allow_board_mismatch)
        self._inspect = None

    @classmethod
    def from_bytes(cls, data, **options):
        """An engine from its bytes in memory (an anonymous file: nothing is written to disk)."""
        fd = os.memfd_create("edgert-engine", os.MFD_CLOEXEC)
        try:
            with os.fdopen(os.dup(fd), "wb") as f:
                f.write(data)
            engine = cls("/proc/self/fd/%d" % fd, **options)
        except BaseException:
            os.close(fd)
            raise
        engine._memfd = fd  # inspect() reads the file again: it stays open as long as the engine
        return engine

    def __del__(self):
        fd = getattr(self, "_memfd", None)
        if fd is not None:
            os.close(fd)

    def _with_profiles(self, tensors):
        profiles = self.inspect().get("profiles") or []
        for t in tensors:
            t["profiles"] = []
            for p in profiles:
                for r in p["inputs"]:
                    if r["name"] == t["name"]:
                        t["profiles"].append({"min": r["min"], "opt": r["opt"], "max": r["max"]})
        return tensors

    @property
    def inputs(self):
        """[{name, dtype, shape (None where dynamic), dim_names, profiles: [{min, opt, max}]}]"""
        return self._with_profiles(self._engine.inputs)

    @property
    def outputs(self):
        return self._engine.outputs

    @property
    def board(self):
        """The board profile the engine was built for."""
        return self._engine.board

    def inspect(self):
        """What the engine holds, as the dict `edgert inspect --json` prints."""
        if self._inspect is None:
            self._inspect = json.loads(_edgert.inspect_engine_file(self._path))
        return self._inspect

    def context(self):
        return Context(self)

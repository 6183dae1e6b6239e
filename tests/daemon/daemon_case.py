"""What the daemon case scripts (daemon_limits_test.py, swap_checks_test.py,
control_protocol_test.py, metrics_test.py) share: their command line BUILD_DIR SOURCE_DIR CASE,
the binaries, a fresh work directory, checks that print ok/FAIL and are counted, the demo and
flat models and their engines, edgertctl and a started edgertd, and the end:
the case run, a test that crashes counted as a failure, the verdict and the exit status. The
work directory is kept when a check failed, for its logs and configurations."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

build, source, case = sys.argv[1], sys.argv[2], sys.argv[3]
edgertd, edgertctl = (os.path.join(build, "bin", n) for n in ("edgertd", "edgertctl"))
# The CLI only builds the test engines: the TSan tier points this at the main build's (uninstrumented) edgert.
edgert = os.environ.get("EDGERT_TEST_CLI") or os.path.join(build, "bin", "edgert")
_script = os.path.basename(sys.argv[0]).removesuffix("_test.py")
work = tempfile.mkdtemp(prefix=f"edgert-{_script}-{case}-")
failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""), flush=True)
    if not ok:
        failures.append(what)


def demo_onnx():
    """tests/models/make_demo_model.py's classifier, made once per case."""
    path = f"{work}/demo.onnx"
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(source, "tests/models/make_demo_model.py"),
                        "--output", path, "--input", f"{work}/demo.npy"], check=True, capture_output=True)
    return path


def flat_onnx():
    """A model whose input is a vector, not an image: it builds and self-tests fine."""
    path = f"{work}/flat.onnx"
    subprocess.run(["/usr/bin/python3", "-c", f"""
from onnx import helper, TensorProto
import onnx
g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'flat',
                      [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 10])],
                      [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 10])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]), '{path}')
"""], check=True)
    return path


def build_engine(onnx=None, name="demo", *flags):
    """An engine for x86_64-generic, which every x86-64 machine runs: of `onnx`, else the demo model."""
    out = f"{work}/{name}.engine"
    subprocess.run([edgert, "build", "--board", "x86_64-generic", onnx or demo_onnx(), "-o", out, *flags],
                   check=True, capture_output=True)
    return out


def ctl(*args):
    """edgertctl on the case's control socket."""
    return subprocess.run([edgertctl, "--socket", f"{work}/control.sock", *args], capture_output=True, text=True,
                          timeout=60)


class Daemon:
    """edgertd on `config` (stderr into a log in the work directory), returned once its control
    socket answers `status`. `preexec` runs in the child before exec (limits to test under)."""

    def __init__(self, config, preexec=None):
        self.log = open(f"{work}/edgertd{len(os.listdir(work))}.log", "w+")
        self.process = subprocess.Popen([edgertd, "--config", config], stderr=self.log, preexec_fn=preexec)
        deadline = time.time() + 30
        while time.time() < deadline and self.process.poll() is None:
            if ctl("status").returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("edgertd did not come up: " + self.stderr())

    def stderr(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        """SIGTERM, then SIGKILL after 15 s; the exit status."""
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.process.returncode


def run_case(cases):
    """Runs cases[case] and exits: 0 when every check held."""
    try:
        cases[case]()
    except Exception as e:  # a crash of the test itself is a failure, with its reason
        traceback.print_exc()
        failures.append(f"{case}: {e}")
    if failures:
        print(f"{len(failures)} checks failed: " + "; ".join(failures))
        print(f"work directory kept: {work}")
        sys.exit(1)
    shutil.rmtree(work, ignore_errors=True)
    print("ALL CHECKS PASSED")
    sys.exit(0)

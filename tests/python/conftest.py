"""Where the Python package's tests find what CTest built: the edgert CLI ($EDGERT_CLI), the
model zoo ($EDGERT_ZOO_DIR, tests/models/make_zoo.py) and a scratch directory per test."""
import json
import os
import subprocess

import numpy as np
import pytest


@pytest.fixture(scope="session")
def cli():
    return os.environ["EDGERT_CLI"]


@pytest.fixture(scope="session")
def zoo():
    folder = os.environ["EDGERT_ZOO_DIR"]
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    return folder, {m["name"]: m for m in manifest["models"]}


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory):
    """A small CNN (tests/models/make_demo_model.py) and an input for it."""
    folder = tmp_path_factory.mktemp("demo")
    source = os.path.join(os.path.dirname(__file__), "..", "models", "make_demo_model.py")
    subprocess.run(["/usr/bin/python3", source, "--output", str(folder / "demo.onnx"), "--input",
                    str(folder / "input.npy")], check=True, stdout=subprocess.DEVNULL)
    return str(folder / "demo.onnx"), np.load(folder / "input.npy")


def run_cli(*args):
    """The edgert CLI; fails the test with its output when it fails."""
    done = subprocess.run([os.environ["EDGERT_CLI"], *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, f"edgert {' '.join(map(str, args))}:\n{done.stdout}{done.stderr}"
    return done.stdout

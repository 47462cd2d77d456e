"""The Python environment the tests run in (issue 14): the project's virtual environment made by scripts/setup.sh from
requirements.txt, with PyTorch 2.x, the release Ascend users work with.

Run by ctest with NPUSIM_PYTHON (CMake's default: .venv/bin/python):  python -m pytest tests/framework/python_env_test.py
"""
import importlib.metadata
import os
import re
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def pins():
    """name -> version of every `name==version` line of requirements.txt."""
    out = {}
    with open(os.path.join(ROOT, "requirements.txt")) as f:
        for line in f:
            m = re.match(r"\s*([A-Za-z0-9_.\-]+)==([^\s#;]+)", line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def test_runs_in_a_virtual_environment():
    # A venv's prefix differs from its base interpreter's; a system Python that happens to have the packages fails.
    assert sys.prefix != sys.base_prefix, f"{sys.executable} is not a virtual environment's interpreter"


def test_torch_is_a_2x_release():
    import torch

    major = int(torch.__version__.split(".")[0])
    assert major == 2, f"torch {torch.__version__}: the front door is built and tested against PyTorch 2.x"


def test_torch_onnx_export_defaults_to_the_2x_exporter():
    # torch.onnx.export(..., dynamo=True) is the default from PyTorch 2.9 on; it needs onnxscript.
    import inspect

    import torch

    assert inspect.signature(torch.onnx.export).parameters["dynamo"].default is True
    import onnxscript  # noqa: F401


@pytest.mark.parametrize("name,version", sorted(pins().items()))
def test_installed_versions_match_requirements(name, version):
    got = importlib.metadata.version(name)
    # A local label (torch's "+cpu") is what the wheel on disk carries; `==2.13.0` accepts it.
    assert got.split("+")[0] == version, f"{name} {got} installed, requirements.txt pins {version}: rerun scripts/setup.sh"

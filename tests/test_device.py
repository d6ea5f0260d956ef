"""Device resolution with GPU builds installed and no GPU (issue 23, item 3), and without them.

No test here needs a GPU. The unit tests simulate what a GPU workstation's install looks like on a machine
without a device: torch's CUDA build that sees none, a GPU build of faiss that counts 0 GPUs (or cannot
count them), cuML failing at import. The slow CLI matrix runs every stage under ``--device auto`` and
``--device cuda`` in subprocesses and holds them to: auto runs (exit 0), cuda is one ``error:`` line that
names what is missing, never a traceback -- with whatever is installed (on CI: torch's CPU build and
faiss-cpu; in the GPU install's venv: torch 2.13.0 (CUDA 13.0), faiss-gpu-cu12 and cuml-cu13, where the
same tests were run once, see the notes of issue 23).
"""

from __future__ import annotations

import importlib.machinery
import logging
import os
import subprocess
import sys
import types

import pytest
from chitragupta import device
from chitragupta.enrich import device as edev
from chitragupta.errors import UsageError

from helpers import ROOT, write_jsonl


def _torch():
    return pytest.importorskip("torch")


def _no_cuda_device(monkeypatch, cuda_version):
    torch = _torch()
    if torch.cuda.is_available():
        pytest.skip("needs a machine where torch sees no CUDA device")
    monkeypatch.setattr(torch.version, "cuda", cuda_version)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(device, "nvidia_device_present", lambda: False)
    return torch


# -- torch's build, read without importing torch ---------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("__version__ = '2.13.0'\ncuda: Optional[str] = '13.0'\n", ("2.13.0", "13.0")),
    ("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n", ("2.13.0+cpu", None)),
    ('__version__ = "2.3.1"\ncuda = "12.1"\n', ("2.3.1", "12.1")),
])
def test_torch_build_is_read_from_version_py(tmp_path, monkeypatch, text, want):
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "version.py").write_text(text, encoding="utf-8")
    spec = importlib.machinery.ModuleSpec("torch", None, is_package=True)
    spec.submodule_search_locations = [str(pkg)]
    monkeypatch.setattr(device.importlib.util, "find_spec", lambda name: spec)
    assert device.torch_build() == want


def test_torch_build_is_none_without_torch(monkeypatch):
    monkeypatch.setattr(device.importlib.util, "find_spec", lambda name: None)
    assert device.torch_build() is None


# -- "cuda" without a device: one line naming what is missing ----------------------------------------------------

def test_cuda_with_a_cuda_build_and_no_device_names_the_build_and_why(monkeypatch):
    _no_cuda_device(monkeypatch, "13.0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(UsageError) as err:
        device.resolve_device("cuda", setting="[retrieval].device")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith('[retrieval].device "cuda" was asked for but there is no CUDA device: torch ')
    assert "(CUDA 13.0 build) sees none: no NVIDIA device or driver is visible" in msg
    assert msg.endswith('use "auto" or "cpu"')


def test_cuda_hidden_by_cuda_visible_devices_says_so(monkeypatch):
    _no_cuda_device(monkeypatch, "13.0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(UsageError, match="CUDA_VISIBLE_DEVICES='' hides every device"):
        device.resolve_device("cuda")


def test_cuda_with_a_cpu_only_torch_names_the_gpu_extra(monkeypatch):
    _no_cuda_device(monkeypatch, None)
    with pytest.raises(UsageError, match=r"is a CPU-only build \(a CUDA build comes with the gpu extra: pip install"):
        device.resolve_device("cuda")


def test_enrich_cuda_error_names_the_faiss_and_cuml_builds(monkeypatch):
    _no_cuda_device(monkeypatch, "13.0")
    monkeypatch.setattr(edev, "faiss_builds", lambda: ["faiss-gpu-cu12 1.14.1.post1"])
    monkeypatch.setattr(edev, "cuml_builds", lambda: ["cuml-cu13 26.10.0"])
    with pytest.raises(UsageError) as err:
        edev.resolve_device("cuda")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith('[enrich].device "cuda" was asked for but there is no CUDA device')
    assert ("installed for the GPU: FAISS: faiss-gpu-cu12 1.14.1.post1; topics: cuml-cu13 26.10.0; "
            'use "auto" or "cpu"') in msg


def test_enrich_cuda_error_names_what_is_not_installed(monkeypatch):
    _no_cuda_device(monkeypatch, None)
    monkeypatch.setattr(edev, "faiss_builds", lambda: ["faiss-cpu 1.15.1"])
    monkeypatch.setattr(edev, "cuml_builds", lambda: [])
    with pytest.raises(UsageError) as err:
        edev.resolve_device("cuda")
    msg = str(err.value)
    assert "FAISS: no GPU build installed" in msg and "topics: cuML not installed" in msg
    assert "CPU-only build" in msg


def test_both_faiss_builds_installed_is_named_with_the_fix(monkeypatch):
    _no_cuda_device(monkeypatch, "13.0")
    monkeypatch.setattr(edev, "faiss_builds", lambda: ["faiss-cpu 1.15.1", "faiss-gpu-cu12 1.14.1.post1"])
    monkeypatch.setattr(edev, "cuml_builds", lambda: [])
    with pytest.raises(UsageError, match="overwrite one faiss module; keep one: pip uninstall -y faiss-cpu "
                                         "faiss-gpu-cu12 && pip install faiss-gpu-cu12"):
        edev.resolve_device("cuda")


# -- "auto" without a device: the CPU, one warning when GPU builds are installed ------------------------------

def test_auto_with_gpu_builds_and_no_device_is_the_cpu_with_one_warning(monkeypatch, caplog):
    monkeypatch.setattr(device, "torch_build", lambda: ("2.13.0", "13.0"))
    monkeypatch.setattr(device, "nvidia_device_present", lambda: False)
    monkeypatch.setattr(device, "_NOTED", set())
    monkeypatch.setattr(edev, "faiss_builds", lambda: ["faiss-gpu-cu12 1.14.1.post1"])
    monkeypatch.setattr(edev, "cuml_builds", lambda: ["cuml-cu13 26.10.0"])
    with caplog.at_level(logging.INFO, logger="chitragupta.device"):
        assert edev.resolve_device("auto") == "cpu"
        assert edev.resolve_device("auto") == "cpu"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("[enrich].device auto -> cpu: no NVIDIA device or driver is visible")
    for name in ("torch 2.13.0 (CUDA 13.0 build)", "faiss-gpu-cu12 1.14.1.post1 (FAISS search)",
                 "cuml-cu13 26.10.0 (topics: UMAP/HDBSCAN)"):
        assert name in warnings[0]


def test_auto_without_gpu_builds_is_the_cpu_without_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(device, "torch_build", lambda: ("2.13.0+cpu", None))
    monkeypatch.setattr(device, "_NOTED", set())
    monkeypatch.setattr(edev, "faiss_builds", lambda: ["faiss-cpu 1.15.1"])
    monkeypatch.setattr(edev, "cuml_builds", lambda: [])
    with caplog.at_level(logging.INFO, logger="chitragupta.device"):
        assert edev.resolve_device("auto") == "cpu"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "[enrich].device auto -> cpu" in caplog.text


# -- faiss: a GPU build on a machine without a GPU --------------------------------------------------------------

def _fake_faiss(monkeypatch, *, gpu: bool, n_gpus=0):
    mod = types.ModuleType("faiss")
    mod.__version__ = "1.14.1"
    if gpu:
        mod.StandardGpuResources = object

        def get_num_gpus():
            if isinstance(n_gpus, Exception):
                raise n_gpus
            return n_gpus

        mod.get_num_gpus = get_num_gpus
    monkeypatch.setitem(sys.modules, "faiss", mod)


def test_faiss_gpu_build_without_a_gpu_says_so(monkeypatch):
    monkeypatch.setattr(edev, "faiss_builds", lambda: ["faiss-gpu-cu12 1.14.1.post1"])
    _fake_faiss(monkeypatch, gpu=True, n_gpus=0)
    assert edev.faiss_gpu_status() == "faiss-gpu-cu12 1.14.1.post1 is a GPU build but sees no GPU"
    assert edev.faiss_gpu_available() is False
    _fake_faiss(monkeypatch, gpu=True, n_gpus=RuntimeError("CUDA driver version is insufficient"))
    assert "cannot count GPUs (RuntimeError: CUDA driver version is insufficient)" in edev.faiss_gpu_status()
    _fake_faiss(monkeypatch, gpu=True, n_gpus=1)
    assert edev.faiss_gpu_status() is None and edev.faiss_gpu_available() is True


def test_faiss_cpu_build_and_a_faiss_that_does_not_import(monkeypatch):
    monkeypatch.setattr(edev, "faiss_builds", lambda: ["faiss-cpu 1.15.1"])
    _fake_faiss(monkeypatch, gpu=False)
    assert edev.faiss_gpu_status().startswith("faiss-cpu 1.15.1 is a CPU-only build (the gpu extra brings")
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss raises
    monkeypatch.setattr(edev, "faiss_builds", lambda: ["faiss-gpu-cu12 1.14.1.post1"])
    assert edev.faiss_gpu_status().startswith("faiss-gpu-cu12 1.14.1.post1 does not import (")
    monkeypatch.setattr(edev, "faiss_builds", lambda: [])
    assert edev.faiss_gpu_status() == "faiss is not installed"


# -- cuML failing at import --------------------------------------------------------------------------------------

def test_cuml_that_fails_at_import_is_named_with_the_error(tmp_path, monkeypatch):
    pkg = tmp_path / "cuml"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('raise RuntimeError("cudaErrorInsufficientDriver: no CUDA driver")\n')
    for name in [m for m in sys.modules if m == "cuml" or m.startswith("cuml.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(edev, "cuml_builds", lambda: ["cuml-cu13 26.10.0"])
    why = edev.cuml_status()
    assert why == ("cuml-cu13 26.10.0 does not import its UMAP/HDBSCAN (RuntimeError: cudaErrorInsufficientDriver: "
                   "no CUDA driver)")
    assert edev.cuml_available() is False


def test_cuml_not_installed_names_the_gpu_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuml", None)
    monkeypatch.setattr(edev, "cuml_builds", lambda: [])
    assert edev.cuml_status().startswith("cuML is not installed (the gpu extra brings")


def test_topics_fallback_reason_names_why_cuml_cannot_be_used(monkeypatch):
    pytest.importorskip("bertopic")
    from chitragupta.enrich import topics as tm

    monkeypatch.setattr(tm, "cuml_available", lambda: False)
    monkeypatch.setattr(tm, "cuml_status", lambda: "cuml-cu13 26.10.0 does not import its UMAP/HDBSCAN (x)")
    name, label, reason = tm.choose_backend("cuda")
    assert (name, label) == ("umap-learn+hdbscan", "umap-learn+hdbscan (cpu)")
    assert "cuML cannot be used (cuml-cu13 26.10.0 does not import its UMAP/HDBSCAN (x))" in reason


# -- the CLI, every stage, auto and cuda, with whatever is installed ---------------------------------------------

def _docs(n: int = 6) -> list[dict]:
    words = ("retrieval ranking corpus query index vector cluster topic model protein cell gene method result "
             "evidence claim trial dose effect").split()
    return [{"_id": f"d{i}", "title": f"paper {i} about {words[i % len(words)]}",
             "text": " ".join(words[(i * 7 + j) % len(words)] for j in range(120))} for i in range(n)]


def _run(*argv, env=None) -> subprocess.CompletedProcess:
    e = dict(os.environ, HF_HUB_OFFLINE="1")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "chitragupta.cli.main", *map(str, argv)], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=600)


def _one_error_line(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, p.stderr
    for n in needles:
        assert n in errors[0], errors[0]
    return errors[0]


def _no_traceback(p: subprocess.CompletedProcess) -> None:
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "Traceback" not in p.stderr + p.stdout, p.stderr


@pytest.mark.slow  # a dozen CLI subprocesses, the model loaded in four
def test_every_stage_under_auto_and_cuda_without_a_gpu(tmp_path):
    torch = _torch()
    pytest.importorskip("faiss")
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("bertopic")
    if torch.cuda.is_available():
        pytest.skip("needs a machine without a CUDA device")
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    ws = tmp_path / "ws"
    ws.mkdir()
    import_jsonl(Workspace.open(ws), write_jsonl(tmp_path / "c.jsonl", _docs()))
    # BM25: the torch backend (torch)
    _no_traceback(_run("search", "-w", ws, "--backend", "torch", "--device", "auto", "ranking corpus"))
    _one_error_line(_run("search", "-w", ws, "--backend", "torch", "--device", "cuda", "ranking corpus"),
                    'device "cuda" was asked for but there is no CUDA device: torch ')
    # embed: encoding (torch) and the store (faiss)
    _one_error_line(_run("enrich", "-w", ws, "--stages", "embed", "--device", "cuda"),
                    '[enrich].device "cuda"', "torch ", "FAISS: ", "topics: ")
    _no_traceback(_run("enrich", "-w", ws, "--stages", "embed", "--device", "auto"))
    # search over the embeddings (faiss)
    _no_traceback(_run("search", "-w", ws, "--engine", "embed", "--device", "auto", "ranking corpus"))
    _one_error_line(_run("search", "-w", ws, "--engine", "embed", "--device", "cuda", "ranking corpus"),
                    '[enrich].device "cuda"', "FAISS: ")
    _no_traceback(_run("search", "-w", ws, "--engine", "hybrid", "--device", "auto", "ranking corpus"))
    # topics (cuML UMAP/HDBSCAN)
    _one_error_line(_run("enrich", "-w", ws, "--stages", "bertopic", "--device", "cuda"),
                    '[enrich].device "cuda"', "topics: ")
    _no_traceback(_run("enrich", "-w", ws, "--stages", "bertopic", "--device", "auto"))
    # CUDA_VISIBLE_DEVICES="" hides any device: the same, and (for a CUDA build) the error says why
    _one_error_line(_run("enrich", "-w", ws, "--stages", "embed", "--device", "cuda",
                         env={"CUDA_VISIBLE_DEVICES": ""}),
                    "CUDA_VISIBLE_DEVICES='' hides" if torch.version.cuda else "CPU-only build")

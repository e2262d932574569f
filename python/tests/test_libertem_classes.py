"""LiberTEM UDF classes, unchanged but for the import, in udf-host's sandbox (issue 27):
every class of the documentation's gallery (plugins/examples/*/libertem.py, as they are)
and of libertem_classes/classes.py runs in LiberTEM 0.16 (`from libertem.udf import UDF`)
and in udf-host (`from udf_host import UDF`), and the results agree: numbers, buffer
names, kinds, dtypes and valid masks, with and without a ROI, on float32 and uint16 data,
in process, on a 2-worker Dask cluster and from the shell.

LiberTEM is optional: where it is not installed these tests skip (scripts/python-tests.sh
installs libertem==0.16.0 into its venv)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import udf_host
from conftest import CACHE, ROOT, cli

HERE = Path(__file__).parent / "libertem_classes"
NOT_INSTALLED = "LiberTEM is not installed here (scripts/python-tests.sh installs libertem==0.16.0)"
LIBERTEM_IMPORT = "from libertem.udf import UDF"
UDF_HOST_IMPORT = "from udf_host import UDF"

#: The gallery's examples that are whole classes, by folder. The pages' snippets assume
#: NumPy and the UDF imported (and the your_udf page's alias RealUDF), so a header adds
#: those imports; the class text is the file's.
GALLERY = {
    "average": "AverageUDF",
    "coords": "CoordUDF",
    "custom_valid_mask": "CustomValidMask",
    "max": "MaxUDF",
    "my_sum": "MySumUDF",
    "pixelsum": "PixelsumUDF",
    "sum_over_sig": "SumOverSig",
    "sumsig_backends": "SumSigUDF",
    "your_udf": "YourUDF",
}
GALLERY_HEADER = f"import numpy as np\nfrom numpy import count_nonzero\n{LIBERTEM_IMPORT}\n{LIBERTEM_IMPORT} as RealUDF\n"


def _module(path: Path, name: str, text: str):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    """The classes twice: `lt` as written (LiberTEM), `uh` with the import changed."""
    pytest.importorskip("libertem", reason=NOT_INSTALLED)
    text = (HERE / "classes.py").read_text()
    assert text.count(LIBERTEM_IMPORT) == 1
    where = tmp_path_factory.mktemp("classes")
    lt = _module(where / "lt_classes.py", "lt_classes", text)
    uh = _module(where / "uh_classes.py", "uh_classes", text.replace(LIBERTEM_IMPORT, UDF_HOST_IMPORT))
    return lt, uh, where


@pytest.fixture(scope="module")
def gallery(tmp_path_factory):
    """Each gallery example twice, as LiberTEM runs it and with the import changed:
    {folder: (LiberTEM's class, udf-host's class, LiberTEM's file)}."""
    pytest.importorskip("libertem", reason=NOT_INSTALLED)
    where = tmp_path_factory.mktemp("gallery")
    out = {}
    for folder, name in [*GALLERY.items(), ("my_param", "MyParamUDF")]:
        text = GALLERY_HEADER + (ROOT / "plugins/examples" / folder / "libertem.py").read_text()
        lt = _module(where / f"lt_{folder}.py", f"lt_{folder}", text)
        uh = _module(where / f"uh_{folder}.py", f"uh_{folder}", text.replace(LIBERTEM_IMPORT, UDF_HOST_IMPORT))
        out[folder] = (getattr(lt, name), getattr(uh, name), where / f"lt_{folder}.py")
    return out


@pytest.fixture(scope="module")
def contexts():
    pytest.importorskip("libertem", reason=NOT_INSTALLED)
    from libertem.api import Context

    lt = Context.make_with("inline")
    yield lt, udf_host.Context(threads=2, cache_dir=CACHE)
    lt.close()


def _data(dtype):
    rng = np.random.default_rng(27)
    data = rng.integers(0, 1000, size=(5, 7, 12, 10))
    return data.astype(dtype)


def _roi():
    roi = np.zeros((5, 7), dtype=bool)
    roi[1:4, 2:6] = True
    roi[0, 0] = True
    return roi


def _masks(cls):
    rng = np.random.default_rng(3)
    return rng.random((4, 12, 10)).astype(np.float32)


def _weights(cls):
    """Aux data made by the class's own `aux_data` (LiberTEM's or udf-host's)."""
    weights = np.linspace(0.5, 2.0, 35, dtype=np.float32).reshape((5, 7))
    return cls.aux_data(data=weights, kind="nav", extra_shape=(), dtype=np.float32)


#: class name -> {keyword argument: function of the class making its value}
CASES = {
    "SumUDF": {},
    "SumSigUDF": {},
    "StdDevUDF": {},
    "ApplyMasksUDF": {"masks": _masks},
    "PartitionStatsUDF": {},
    "AuxWeightedSumUDF": {"weights": _weights},
    "MaskedCountUDF": {},
    "BufferDeclarationsUDF": {},
}


def _compare(name, expected, found):
    assert sorted(found) == sorted(expected), f"{name}: buffer names"
    for key, want in expected.items():
        got = found[key]
        what = f"{name}.{key}"
        assert got.kind == want.kind, f"{what}: kind"
        assert np.dtype(got.dtype) == np.dtype(want.dtype), f"{what}: dtype {got.dtype} vs {want.dtype}"
        assert got.data.shape == want.data.shape, f"{what}: shape"
        np.testing.assert_array_equal(got.valid_mask, want.valid_mask, err_msg=f"{what}: valid mask")
        w, g = np.asarray(want.data), np.asarray(got.data)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


@pytest.mark.parametrize("dtype", [np.float32, np.uint16])
@pytest.mark.parametrize("with_roi", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_class_gives_libertems_results(classes, contexts, name, dtype, with_roi):
    lt_mod, uh_mod, _ = classes
    lt_ctx, uh_ctx = contexts
    data = _data(dtype)
    lt_cls, uh_cls = getattr(lt_mod, name), getattr(uh_mod, name)
    roi = _roi() if with_roi else None
    lt_ds = lt_ctx.load("memory", data=data, sig_dims=2, num_partitions=3)
    expected = lt_ctx.run_udf(dataset=lt_ds, udf=lt_cls(**{k: f(lt_cls) for k, f in CASES[name].items()}), roi=roi)
    uh_ds = uh_ctx.load("memory", data=data, sig_dims=2)
    uh_udf = uh_cls(**{k: f(uh_cls) for k, f in CASES[name].items()})
    found = uh_ctx.run_udf(dataset=uh_ds, udf=uh_udf, roi=roi, partitions=3)
    _compare(name, expected, found)


@pytest.mark.parametrize("dtype", [np.float32, np.uint16])
@pytest.mark.parametrize("with_roi", [False, True])
@pytest.mark.parametrize("folder", list(GALLERY))
def test_the_gallery_example_gives_libertems_results(gallery, contexts, folder, dtype, with_roi):
    """A square scan: CustomValidMask indexes a buffer with `self.meta.coordinates` (NumPy's
    integer-array indexing along the first axis), which LiberTEM only runs on one."""
    lt_cls, uh_cls, _ = gallery[folder]
    data = np.random.default_rng(9).integers(0, 1000, size=(6, 6, 8, 9)).astype(dtype)
    roi = None
    if with_roi:
        roi = np.zeros((6, 6), dtype=bool)
        roi[1:4, 2:5] = True
        roi[5, 0] = True
    lt_ds = contexts[0].load("memory", data=data, sig_dims=2, num_partitions=3)
    expected = contexts[0].run_udf(dataset=lt_ds, udf=lt_cls(), roi=roi)
    uh_ds = contexts[1].load("memory", data=data, sig_dims=2)
    found = contexts[1].run_udf(dataset=uh_ds, udf=uh_cls(), roi=roi, partitions=3)
    _compare(GALLERY[folder], expected, found)


def test_object_buffers_are_refused_naming_the_buffer(gallery, contexts):
    """MyParamUDF (the gallery's my_param: "Declaring a constructor") declares a
    dtype=object buffer: host arrays are numeric, so udf-host says so before any data is
    read."""
    uh_cls = gallery["my_param"][1]
    ds = contexts[1].load("memory", data=_data(np.float32), sig_dims=2)
    with pytest.raises(udf_host.UDFError, match=r"'demo'.*dtype.*numeric"):
        contexts[1].run_udf(dataset=ds, udf=uh_cls())


@pytest.mark.parametrize("name", ["SumUDF", "SumSigUDF", "StdDevUDF", "PartitionStatsUDF", "average"])
def test_the_shell_runs_the_libertem_file_unchanged(classes, gallery, contexts, tmp_path, name):
    """`udf-host run lt_file.py:Class data.npy`: the file as LiberTEM runs it (its import
    unchanged) gives LiberTEM's numbers."""
    if name in GALLERY:
        lt_cls, _, file = gallery[name]
    else:
        lt_cls, file = getattr(classes[0], name), classes[2] / "lt_classes.py"
    data = _data(np.uint16)
    np.save(tmp_path / "data.npy", data)
    lt_ds = contexts[0].load("memory", data=data, sig_dims=2, num_partitions=3)
    expected = contexts[0].run_udf(dataset=lt_ds, udf=lt_cls())
    out = tmp_path / "out"
    cli("run", f"{file}:{lt_cls.__name__}", tmp_path / "data.npy", "--out", out, "--cache-dir", CACHE, "-q")
    for key, want in expected.items():
        got = np.load(out / lt_cls.__name__ / f"{key}.npy")
        np.testing.assert_allclose(got, want.data, rtol=2e-5, err_msg=f"{lt_cls.__name__}.{key}")


def test_inspect_describes_the_class_from_its_file(classes):
    _, _, where = classes
    text = cli("inspect", f"{where / 'uh_classes.py'}:ApplyMasksUDF", "--cache-dir", CACHE).stdout
    assert "ApplyMasksUDF" in text and "Dot product of every frame" in text and "masks" in text


def test_a_class_file_passes_the_conformance_kit(classes):
    _, _, where = classes
    done = cli("conformance", f"{where / 'lt_classes.py'}:StdDevUDF", "--cache-dir", CACHE)
    assert "CONFORMS" in done.stdout


@pytest.mark.parametrize("name", ["SumUDF", "StdDevUDF", "ApplyMasksUDF", "AuxWeightedSumUDF", "MaskedCountUDF"])
@pytest.mark.parametrize("with_roi", [False, True])
def test_on_a_two_worker_dask_cluster_the_class_gives_libertems_results(classes, contexts, dask_client, name,
                                                                         with_roi):
    lt_mod, uh_mod, _ = classes
    data = _data(np.float32)
    roi = _roi() if with_roi else None
    lt_cls, uh_cls = getattr(lt_mod, name), getattr(uh_mod, name)
    lt_ds = contexts[0].load("memory", data=data, sig_dims=2, num_partitions=3)
    expected = contexts[0].run_udf(dataset=lt_ds, udf=lt_cls(**{k: f(lt_cls) for k, f in CASES[name].items()}),
                                   roi=roi)
    ctx = udf_host.Context(executor=udf_host.DaskExecutor(dask_client))
    ds = ctx.load("memory", data=data, sig_dims=2)
    found = ctx.run_udf(dataset=ds, udf=uh_cls(**{k: f(uh_cls) for k, f in CASES[name].items()}), roi=roi,
                        partitions=4)
    _compare(name, expected, found)


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed", reason="Dask's distributed is not installed")
    os.environ["UDF_HOST_CACHE_DIR"] = str(CACHE)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0",
        worker_dashboard_address=":0",
    ) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.mark.parametrize("name", ["SumUDF", "StdDevUDF", "ApplyMasksUDF", "PartitionStatsUDF", "AuxWeightedSumUDF",
                                  "MaskedCountUDF"])
@pytest.mark.parametrize("with_roi", [False, True])
def test_inside_libertem_the_class_gives_libertems_results(classes, contexts, name, with_roi):
    """`udf_host.libertem.ClassUDF(MyUDF(...))` in LiberTEM's own Context: the class runs
    sandboxed with LiberTEM driving, and agrees with the class run by LiberTEM itself."""
    from udf_host.libertem import ClassUDF

    lt_mod, uh_mod, _ = classes
    data = _data(np.uint16)
    roi = _roi() if with_roi else None
    lt_cls, uh_cls = getattr(lt_mod, name), getattr(uh_mod, name)
    lt_ds = contexts[0].load("memory", data=data, sig_dims=2, num_partitions=3)
    expected = contexts[0].run_udf(dataset=lt_ds, udf=lt_cls(**{k: f(lt_cls) for k, f in CASES[name].items()}),
                                   roi=roi)
    wrapped = ClassUDF(uh_cls(**{k: f(uh_cls) for k, f in CASES[name].items()}))
    found = contexts[0].run_udf(dataset=lt_ds, udf=wrapped, roi=roi)
    _compare(name, expected, found)

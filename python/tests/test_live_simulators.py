"""`udf-host live` against LiberTEM-live's own simulators (libertem-live 0.3.0:
`libertem-live-mib-sim`, `libertem-live-dectris-sim`), so that the receivers are
checked against protocol implementations nobody here wrote; results are compared with
NumPy over the frames the simulators replay.

The simulators are optional: where libertem-live is not installed these tests skip
(scripts/python-tests.sh installs `libertem-live[sim]==0.3.0` into its venv). They listen
on 127.0.0.1 only (the Merlin simulator's default is 0.0.0.0: it is given --host)."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import CLI, cli, scan

NOT_INSTALLED = "libertem-live is not installed here (scripts/python-tests.sh installs libertem-live[sim]==0.3.0)"


def simulator(name: str) -> str:
    pytest.importorskip("libertem_live", reason=NOT_INSTALLED)
    path = Path(sys.executable).parent / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.skip(f"{name} is not on PATH: {NOT_INSTALLED}")
        return found
    return str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the simulator exited ({process.returncode}): {process.stderr.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"the simulator did not listen on port {port} within {seconds} s")


def start_dectris(command: list[str]) -> tuple[subprocess.Popen, int, int]:
    """Start LiberTEM-live's DECTRIS simulator on ports it picks (it binds its ZeroMQ
    port twice, reading the headers and then serving, so a port chosen here can race
    the first bind's release); the ports are read from its log."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    api_port = zmq_port = None
    seen = []
    deadline = time.monotonic() + 90
    while (api_port is None or zmq_port is None) and time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        if found := re.search(r"API server listening on \('[^']*', (\d+)", line):
            api_port = int(found.group(1))
        if found := re.search(r"listening on tcp://127\.0\.0\.1:(\d+)", line):
            zmq_port = int(found.group(1))
    if api_port is None or zmq_port is None:
        process.kill()
        pytest.fail(f"the simulator did not say where it listens: {''.join(seen)}")
    # Keep reading its log, or it blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()
    return process, api_port, zmq_port


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def write_mib(path: Path, frames: np.ndarray, pixel: str) -> None:
    """A .mib file as Merlin writes it: a 384-byte header per frame, big-endian pixels."""
    dtype = {"U08": ">u1", "U16": ">u2", "U32": ">u4"}[pixel]
    height, width = frames.shape[-2:]
    with open(path, "wb") as f:
        for i, frame in enumerate(frames.reshape(-1, height, width)):
            header = (
                f"MQ1,{i + 1:06d},00384,01,{width:04d},{height:04d},{pixel},   1x1,01,"
                "2020-05-18 16:51:49.971626,0.000555,0,0,0,1.2E+2,5.1E+2,MQ1A,"
                "2020-05-18T14:51:49.971626178Z,555000ns,12,"
            ).encode()
            f.write(header.ljust(384, b"\0"))
            f.write(frame.astype(dtype).tobytes())


def live(tmp_path: Path, source: str, nav, *extra: str) -> Path:
    out = tmp_path / "live"
    nav_text = ",".join(map(str, nav))
    cli("live", source, "builtin:sum", "builtin:sumsig", "--nav-shape", nav_text, "--out", out, "-q",
        "--start-timeout", "60", "--threads", "2", *extra)
    return out


def check(out: Path, frames: np.ndarray) -> None:
    nav = frames.shape[:2]
    as_f64 = frames.astype(np.float64)
    np.testing.assert_array_equal(np.load(out / "sum" / "intensity.npy"), as_f64.sum(axis=(0, 1)).astype(np.float32))
    np.testing.assert_array_equal(
        np.load(out / "sumsig" / "intensity.npy"), as_f64.sum(axis=(2, 3)).astype(np.float32).reshape(nav)
    )
    summary = json.loads((out / "results.json").read_text())
    assert summary["status"] == "complete"
    assert summary["live"]["frames_received"] == frames.shape[0] * frames.shape[1]


@pytest.mark.parametrize("pixel,dtype", [("U08", np.uint8), ("U16", np.uint16), ("U32", np.uint32)])
def test_merlin_simulator_of_libertem_live(tmp_path, pixel, dtype):
    sim = simulator("libertem-live-mib-sim")
    nav = (5, 8)
    frames = scan(nav=nav, sig=(32, 32), seed=3, dtype=dtype)
    path = tmp_path / "scan.mib"
    write_mib(path, frames, pixel)
    data_port, control_port, trigger_port = free_port(), free_port(), free_port()
    process = subprocess.Popen(
        [sim, str(path), "--nav-shape", str(nav[0]), str(nav[1]), "--host", "127.0.0.1",
         "--data-port", str(data_port), "--control-port", str(control_port), "--trigger-port", str(trigger_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_listening(data_port, process)
        out = live(tmp_path, f"merlin://127.0.0.1:{data_port}", nav)
    finally:
        stop(process)
    check(out, frames)


def start_mib_sim_waiting_for_trigger(tmp_path: Path, frames: np.ndarray) -> tuple[subprocess.Popen, int, int]:
    """LiberTEM-live's Merlin simulator with --wait-trigger: it sends nothing on the data
    port until STARTACQUISITION and SOFTTRIGGER come through its control port."""
    sim = simulator("libertem-live-mib-sim")
    nav = frames.shape[:2]
    path = tmp_path / "scan.mib"
    write_mib(path, frames, "U16")
    data_port, control_port, trigger_port = free_port(), free_port(), free_port()
    process = subprocess.Popen(
        [sim, str(path), "--nav-shape", str(nav[0]), str(nav[1]), "--host", "127.0.0.1", "--wait-trigger",
         "--data-port", str(data_port), "--control-port", str(control_port), "--trigger-port", str(trigger_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    # Probe the trigger port only: the simulator serves its data and control ports one
    # connection at a time, and a probe of the data port can take the start meant for
    # udf-host's connection. The three ports listen before the simulator serves any.
    wait_listening(trigger_port, process)
    return process, data_port, control_port


def test_merlin_control_port_of_libertem_live_arms_the_simulator(tmp_path):
    """`--api HOST:PORT --soft-trigger`: without udf-host's commands on the control port
    the simulator would send nothing and the run would end at its start timeout."""
    nav = (4, 7)
    frames = scan(nav=nav, sig=(16, 24), seed=11, dtype=np.uint16)
    process, data_port, control_port = start_mib_sim_waiting_for_trigger(tmp_path, frames)
    try:
        out = live(tmp_path, f"merlin://127.0.0.1:{data_port}", nav, "--api", f"127.0.0.1:{control_port}",
                   "--merlin-set", "COUNTERDEPTH=12", "--soft-trigger")
    finally:
        stop(process)
    check(out, frames)


def test_merlin_control_port_from_python(tmp_path):
    import udf_host

    nav = (3, 5)
    frames = scan(nav=nav, sig=(8, 16), seed=12, dtype=np.uint16)
    process, data_port, control_port = start_mib_sim_waiting_for_trigger(tmp_path, frames)
    try:
        ctx = udf_host.Context(threads=2)
        ds = ctx.load("merlin-live", host="127.0.0.1", port=data_port, nav_shape=nav,
                      api=f"127.0.0.1:{control_port}", merlin_settings={"COUNTERDEPTH": 12},
                      soft_trigger=True, start_timeout=60)
        res = ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sum"))
    finally:
        stop(process)
    expected = frames.astype(np.float64).sum(axis=(0, 1)).astype(np.float32)
    np.testing.assert_array_equal(res["intensity"].data, expected)
    with pytest.raises(ValueError, match="control port"):
        ctx.load("merlin-live", host="127.0.0.1", port=data_port, nav_shape=nav, soft_trigger=True)


def write_dectris_dump(path: Path, frames: np.ndarray) -> None:
    """A recorded DECTRIS Stream V1 series in LiberTEM-live's dump format (little-endian
    int64 length + message), uncompressed uint16 pixels ("<")."""
    nav_len = frames.shape[0] * frames.shape[1]
    height, width = frames.shape[-2:]
    messages = [
        {"htype": "dheader-1.0", "header_detail": "basic", "series": 34},
        {"trigger_mode": "exte", "nimages": 1, "ntrigger": nav_len, "x_pixels_in_detector": width,
         "y_pixels_in_detector": height, "bit_depth_image": 16, "compression": "none"},
    ]
    with open(path, "wb") as f:
        def put(message: bytes) -> None:
            f.write(np.int64(len(message)).tobytes())
            f.write(message)

        for m in messages:
            put(json.dumps(m).encode())
        for i, frame in enumerate(frames.reshape(-1, height, width)):
            data = frame.astype("<u2").tobytes()
            put(json.dumps({"htype": "dimage-1.0", "series": 34, "frame": i, "hash": "0"}).encode())
            put(json.dumps({"htype": "dimage_d-1.0", "shape": [width, height], "type": "uint16",
                            "encoding": "<", "size": len(data)}).encode())
            put(data)
            put(json.dumps({"htype": "dconfig-1.0", "start_time": 0, "stop_time": 0, "real_time": 0}).encode())
        put(json.dumps({"htype": "dseries_end-1.0", "series": 34}).encode())


def test_dectris_simulator_of_libertem_live(tmp_path):
    sim = simulator("libertem-live-dectris-sim")
    nav = (4, 6)
    frames = scan(nav=nav, sig=(24, 32), seed=5, dtype=np.uint16)
    path = tmp_path / "series.dump"
    write_dectris_dump(path, frames)
    process, api_port, zmq_port = start_dectris([sim, str(path), "--port", "0", "--zmqport", "0"])
    try:
        out = live(tmp_path, f"dectris://127.0.0.1:{zmq_port}", nav, "--api", f"http://localhost:{api_port}")
    finally:
        stop(process)
    check(out, frames)


def test_dectris_mock_frames_of_libertem_rs_decode(tmp_path):
    """LiberTEM-rs's mock series: 512 x 512 uint16 frames compressed by the C bitshuffle
    library ("bs16-lz4<"), frame k filled with k: an encoder nobody here wrote."""
    pytest.importorskip("libertem_live", reason=NOT_INSTALLED)
    pytest.importorskip("flask", reason=NOT_INSTALLED)
    n = 12

    script = (
        "import logging, time\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from libertem_live.detectors.dectris.sim import DectrisSim\n"
        f"sim = DectrisSim(port=0, zmqport=0, num_mock_frames={n})\n"
        "sim.start(); sim.wait_for_listen()\n"
        "time.sleep(120)\n"
    )
    process, api_port, zmq_port = start_dectris([sys.executable, "-c", script])
    try:
        out = tmp_path / "live"
        cli("live", f"dectris://127.0.0.1:{zmq_port}", "builtin:sumsig", "--nav-shape", f"{n}", "--out", out, "-q",
            "--start-timeout", "60", "--api", f"http://localhost:{api_port}")
    finally:
        stop(process)
    sums = np.load(out / "sumsig" / "intensity.npy")
    np.testing.assert_array_equal(sums, (np.arange(n) * 512.0 * 512.0).astype(np.float32))

"""Dask across simulated hosts: the scheduler and two workers each in a network namespace
of its own, joined by veth pairs on a bridge, each worker with its own plugin cache; the
client in the root namespace. Catches assumptions that only hold in one process or on one
host (plugins found by path, a shared compile cache, loopback addresses). The dataset is
on a shared path, as it would be on a cluster file system.

Needs root and iproute2 (`ip netns`); skipped with the reason where namespaces cannot be
made."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="Dask's distributed is not installed (pip install distributed)")

import udf_host  # noqa: E402

from conftest import plugin, scan  # noqa: E402

PREFIX = f"udf{os.getpid() % 100000}"
SUBNET = "10.231.7"
SCHEDULER = f"{SUBNET}.2"


def run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def namespaces_available() -> str | None:
    """None if network namespaces can be made here, else why not."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    probe = f"{PREFIX}probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class Hosts:
    """A bridge in the root namespace (the client's host, .1) and one namespace per host,
    each with a veth pair into the bridge."""

    def __init__(self, names: list[str]):
        self.bridge = f"{PREFIX}br"
        self.namespaces: dict[str, str] = {}
        self.processes: list[subprocess.Popen] = []
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{SUBNET}.1/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for i, name in enumerate(names, start=2):
            ns = f"{PREFIX}{name}"
            outer, inner = f"{PREFIX}{name}o", f"{PREFIX}{name}i"
            run("ip", "netns", "add", ns)
            run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            run("ip", "link", "set", inner, "netns", ns)
            run("ip", "link", "set", outer, "master", self.bridge)
            run("ip", "link", "set", outer, "up")
            run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{SUBNET}.{i}/24", "dev", inner)
            run("ip", "netns", "exec", ns, "ip", "link", "set", inner, "up")
            run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            self.namespaces[name] = ns

    def start(self, host: str, args: list[str], env: dict[str, str], log: Path) -> None:
        out = open(log, "w")
        self.processes.append(
            subprocess.Popen(["ip", "netns", "exec", self.namespaces[host], *args], env={**os.environ, **env},
                             stdout=out, stderr=subprocess.STDOUT)
        )

    def close(self) -> None:
        for p in self.processes:
            p.terminate()
        for p in self.processes:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for ns in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


@pytest.fixture
def hosts(tmp_path):
    reason = namespaces_available()
    if reason is not None:
        pytest.skip(f"cannot simulate hosts: {reason}")
    h = Hosts(["sched", "hosta", "hostb"])
    bin_dir = Path(sys.executable).parent
    try:
        h.start("sched", [str(bin_dir / "dask"), "scheduler", "--host", SCHEDULER, "--port", "8786", "--no-dashboard"],
                {}, tmp_path / "scheduler.log")
        for i, name in enumerate(["hosta", "hostb"], start=3):
            cache = tmp_path / f"cache-{name}"
            h.start(name, [str(bin_dir / "dask"), "worker", f"tcp://{SCHEDULER}:8786", "--host", f"{SUBNET}.{i}",
                           "--nthreads", "1", "--no-dashboard", "--name", name],
                    {"UDF_HOST_CACHE_DIR": str(cache)}, tmp_path / f"{name}.log")
        yield h, tmp_path
    finally:
        h.close()


def test_a_run_across_hosts_gives_the_in_process_result(hosts):
    h, tmp = hosts
    data = scan(nav=(5, 8), sig=(12, 10), seed=11)
    path = tmp / "shared" / "scan.npy"
    path.parent.mkdir()
    np.save(path, data)
    client = distributed.Client(f"tcp://{SCHEDULER}:8786", timeout=30)
    try:
        deadline = time.monotonic() + 60
        while len(client.scheduler_info()["workers"]) < 2:
            if time.monotonic() > deadline:
                logs = "\n".join(p.read_text()[-2000:] for p in tmp.glob("*.log"))
                pytest.fail(f"the workers did not join the scheduler:\n{logs}")
            time.sleep(0.2)
        workers = client.scheduler_info()["workers"]
        assert {w["host"] for w in workers.values()} == {f"{SUBNET}.3", f"{SUBNET}.4"}
        # Plugins from bytes only: no host can read them from a path.
        udfs = [
            udf_host.WasmUDF(plugin("sum").read_bytes()),
            udf_host.WasmUDF(plugin("sumsig").read_bytes()),
            udf_host.BuiltinUDF("stddev"),
        ]
        remote = udf_host.Context(executor=udf_host.DaskExecutor(client))
        local = udf_host.Context(threads=1)
        got = remote.run_udf(dataset=remote.load("npy", path=path), udf=udfs, partitions=6)
        want = local.run_udf(dataset=local.load("npy", path=path), udf=udfs, partitions=6)
        for g, w in zip(got, want):
            for name in w:
                if name in ("var", "std", "mean", "varsum", "sum") and w[name].dtype == np.float64:
                    np.testing.assert_allclose(g[name].data, w[name].data, rtol=1e-12, err_msg=name)
                else:
                    np.testing.assert_array_equal(g[name].data, w[name].data, err_msg=name)
        # Both hosts ran partitions, each compiling the plugins into its own cache.
        for name in ["hosta", "hostb"]:
            compiled = list((tmp / f"cache-{name}").rglob("*.cwasm"))
            assert compiled, f"{name} compiled no plugin into its own cache"
    finally:
        client.close()

"""`preschool prepare --executor ray` against a real two-node Ray on this machine.

Opt-in (marker ``ray_cluster``, excluded by default): needs the ``ray`` extra; runs with
``pytest -m ray_cluster tests/cluster -s`` in about a minute or two on 2 cores. A head
(``ray start --head``) and a second node (``ray start --address``) run as separate processes
on 127.0.0.1, one CPU each, with token authentication (a fresh token in their environment,
nothing read from or written to ~/.ray); the prepare connects with ``--ray-address`` and must
write the bytes of an engine prepare, with datatrove tasks on both nodes. Both nodes are
stopped by their process groups (the ``spawn`` fixture), never with ``ray stop``, which
would stop every Ray of this user. docs/scale.md records a run.
"""

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from preschool.cli import main
from preschool.data.shards import content_sha256

pytestmark = pytest.mark.ray_cluster

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
MICRO = ["tokenizer.vocab_size=300", "tokenizer.sample_documents=200", "data.pt.tokens=20000",
         "data.pt.val_tokens=2048", "data.pt.unit_tokens=3000", "data.dyck.tokens=4000", "data.dyck.val_tokens=1024",
         "data.dyck.unit_tokens=600"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sets(out: Path) -> list[str]:
    return [x for o in [f"out={out}", *MICRO] for x in ("--set", o)]


def _rank_worker_nodes(logs: Path) -> set[str]:
    """The IDs of the nodes whose workers ran datatrove tasks, from a Ray session's logs: a worker's
    ``worker-<id>-<job>-<pid>.err`` names the actor it hosts (datatrove's ``RankWorker``), and its
    ``python-core-worker-<id>_<pid>.log`` the node it was started on (``worker_id=<id> node_id=<node>``)."""
    nodes = set()
    for err in logs.glob("worker-*.err"):
        if ":actor_name:RankWorker" not in err.read_text(errors="replace"):
            continue
        worker = err.name.split("-")[1]
        for core in logs.glob(f"python-core-worker-{worker}_*.log"):
            nodes.update(re.findall(rf"worker_id={worker} node_id=([0-9a-f]+)", core.read_text(errors="replace")))
    return nodes


def _wait_for_nodes(env: dict, address: str, n: int, procs: list, timeout: float) -> list[str]:
    """The node IDs of the cluster at ``address`` once ``n`` nodes are alive; AssertionError after ``timeout``
    or as soon as one of the ``ray start`` processes ``procs`` has exited."""
    probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
             "print(' '.join(sorted(x['NodeID'] for x in ray.nodes() if x['Alive'])))")
    end, seen = time.monotonic() + timeout, ""
    while time.monotonic() < end:
        dead = [p.args for p in procs if p.poll() is not None]
        assert not dead, f"ray start exited: {dead} (see head.log / node.log in the test's tmp_path)"
        try:  # ray.init waits on an unreachable GCS for a long time: each probe gets a bounded slot
            res = subprocess.run([sys.executable, "-c", probe, address], env=env, capture_output=True, text=True,
                                 timeout=30)
        except subprocess.TimeoutExpired:
            continue
        seen = res.stdout.strip() or res.stderr[-500:]
        if res.returncode == 0 and len(seen.split()) >= n:
            return seen.split()
        time.sleep(2)
    raise AssertionError(f"Ray at {address}: {n} nodes not alive after {timeout} s: {seen}")


@pytest.fixture
def ray_temp():
    """A short Ray temp dir (its socket paths must fit AF_UNIX's 107 bytes; pytest's tmp_path may not),
    removed after the nodes, which ``spawn`` stops first (it is set up later, so torn down earlier)."""
    folder = Path(tempfile.mkdtemp(prefix="ray-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_prepare_on_a_two_node_local_ray_gives_the_engine_bytes(tmp_path, ray_temp, spawn):
    pytest.importorskip("ray", reason="needs the `ray` extra")
    pytest.importorskip("datatrove", reason="needs the `datatrove` extra")
    ray_bin = Path(sys.executable).parent / "ray"
    port, temp = _free_port(), ray_temp
    address = f"127.0.0.1:{port}"
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)  # only --ray-address names the cluster
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"]
    with (tmp_path / "head.log").open("w") as log:  # the child keeps its own copy of the descriptor
        head = spawn([ray_bin, "start", "--head", f"--port={port}", f"--temp-dir={temp}", "--include-dashboard=false",
                      *common], env=env, stdout=log, stderr=subprocess.STDOUT)
    _wait_for_nodes(env, address, 1, [head], timeout=120)
    with (tmp_path / "node.log").open("w") as log:
        node = spawn([ray_bin, "start", f"--address={address}", *common], env=env, stdout=log,
                     stderr=subprocess.STDOUT)
    nodes = _wait_for_nodes(env, address, 2, [head, node], timeout=120)

    assert main(["prepare", str(QUICKSTART), *_sets(tmp_path / "engine"), "--no-progress", "--workers", "1"]) == 0
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "preschool.cli", "prepare", str(QUICKSTART),
                          *_sets(tmp_path / "ray-out"), "--no-progress", "--executor", "ray", "--tasks", "2",
                          "--ray-address", address], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=900)
    wall = time.monotonic() - started
    assert res.returncode == 0, res.stderr[-3000:]
    for name in ("pt", "dyck"):
        engine, ray = (content_sha256(tmp_path / d / "data" / name) for d in ("engine", "ray-out"))
        assert engine == ray is not None, name
    ran_on = _rank_worker_nodes(temp / "session_latest" / "logs")
    print(f"ray nodes {nodes}; prepare --executor ray: {wall:.1f} s; tasks ran on {sorted(ran_on)}\n"
          f"{res.stdout}")
    assert ran_on == set(nodes), (ran_on, nodes)

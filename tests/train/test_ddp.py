"""DDP on CPU: 2 gloo processes under torchrun train the same global batches as one process."""

import json
import textwrap

import pytest
import torch

from preschool.train.trainer import train

SCRIPT = textwrap.dedent('''
    import json, os, sys, torch
    from preschool.train.callbacks import Callback
    from preschool.train.trainer import train

    class Dump(Callback):
        def on_train_end(self, trainer):
            torch.save({k: v.detach().clone() for k, v in trainer.model.state_dict().items()},
                       os.path.join(sys.argv[1], f"params-rank{trainer.rank}.pt"))

    cfg, out, datasets = json.load(open(sys.argv[2]))
    train(cfg, out, datasets, callbacks=[Dump()])
''')


def rows(run):
    return [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in l]


@pytest.mark.slow  # 13 s idle, ~45 s on a loaded 2-core box (process start + imports)
def test_two_rank_ddp_matches_single_process(tmp_path, datasets, micro_cfg, torchrun, rounding):
    pytest.importorskip("torch.distributed.run")
    cfg = micro_cfg(stages=[{"name": "pt", "data": {"text": 1, "synth": 1}, "tokens": 4 * 16 * 4}],
                    checkpoint_every=2, micro_batch_size=1, attention_reset_between_docs=True,
                    device="cpu")  # gloo ranks on CPU even where a GPU exists
    datasets = {k: str(v) for k, v in datasets.items()}
    (tmp_path / "job.json").write_text(json.dumps([cfg, str(tmp_path / "ddp"), datasets]))
    (tmp_path / "script.py").write_text(SCRIPT)
    proc = torchrun(tmp_path / "script.py", tmp_path, tmp_path / "job.json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    p0 = torch.load(tmp_path / "params-rank0.pt")
    p1 = torch.load(tmp_path / "params-rank1.pt")
    assert all(torch.equal(p0[k], p1[k]) for k in p0)  # replicas agree exactly
    single = train(cfg, tmp_path / "single", datasets)
    assert single["steps"] == 4
    a, b = rows(tmp_path / "ddp"), rows(tmp_path / "single")
    assert [r["step"] for r in a] == [1, 2, 3, 4]
    rounding.assert_same_losses(a, b)  # the order of float sums differs (conftest's RoundingTolerance)
    from safetensors.torch import load_file

    ref = load_file(str(tmp_path / "single" / "checkpoints" / "step-00000004" / "model.safetensors"))
    rounding.assert_same_weights({k: p0[k] for k in ref}, ref, b)
    assert (tmp_path / "ddp" / "DONE").is_file()


@pytest.mark.slow
def test_cli_under_torchrun(tmp_path, datasets, micro_cfg, torchrun):
    import yaml

    cfg = micro_cfg(device="cpu", checkpoint_every=2)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"train": cfg, "datasets": {k: str(v) for k, v in datasets.items()}}))
    proc = torchrun("-m", "preschool.cli", "train", tmp_path / "run.yaml", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count('"steps": 8') == 1  # only rank 0 prints the summary
    assert (tmp_path / "out" / "DONE").is_file()
    assert [r["step"] for r in rows(tmp_path / "out")] == list(range(1, 9))


@pytest.mark.rendezvous  # opt-in: pytest -m rendezvous tests/train/test_ddp.py
def test_two_torchrun_agents_meet_by_c10d_rendezvous_and_match_one_process(tmp_path, datasets, micro_cfg, spawn,
                                                                           rounding):
    """Two nodes on 127.0.0.1, as ``preschool launch --slurm`` starts them: one torchrun agent per node, each
    with one gloo rank, meet through a c10d rendezvous (the first agent hosts its store) and run
    ``preschool train``; the result equals one process's. Ranks come from the rendezvous, so no --node-rank."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import yaml
    from safetensors.torch import load_file

    cfg = micro_cfg(device="cpu")  # 8 steps, checkpoint at 4 and 8
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"train": cfg, "datasets": {k: str(v) for k, v in datasets.items()}}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # loopback only: gloo's sockets on lo, the agents' addresses and the store on 127.0.0.1
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    started = time.monotonic()
    agents = [spawn([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                     "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "preschool-rdzv",
                     "--rdzv-conf", f"is_host={int(node == 0)},join_timeout=300", "--local-addr", "127.0.0.1",
                     "--max-restarts", "0", "-m", "preschool.cli", "train", tmp_path / "run.yaml",
                     "--out", tmp_path / "ddp"],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for node in (0, 1)]
    outs = [agent.communicate(timeout=900) for agent in agents]  # on a timeout, spawn's teardown kills both
    wall = time.monotonic() - started
    for agent, (_, err) in zip(agents, outs):
        assert agent.returncode == 0, err[-3000:]
    assert sum(out.count('"steps": 8') for out, _ in outs) == 1  # one global rank 0 across the two nodes
    single = train(cfg, tmp_path / "single", {k: str(v) for k, v in datasets.items()})
    assert single["steps"] == 8
    a, b = rows(tmp_path / "ddp"), rows(tmp_path / "single")
    assert [r["step"] for r in a] == list(range(1, 9))
    rounding.assert_same_losses(a, b)
    ddp, ref = (load_file(str(tmp_path / d / "checkpoints" / "step-00000008" / "model.safetensors"))
                for d in ("ddp", "single"))
    rounding.assert_same_weights(ddp, ref, b)
    assert (tmp_path / "ddp" / "DONE").is_file()
    print(f"two torchrun agents (c10d rendezvous on 127.0.0.1:{port}) trained 8 steps in {wall:.1f} s")

"""FSDP2 on CPU (gloo): parity with DDP and one process, sharded checkpoints, resume across world sizes.

Tolerances: every run is fp32. Runs on the same world size in the same mode are
bit-identical (an FSDP kill-and-resume equals the uninterrupted run exactly).
Changing the mode or the world size changes only the order of floating-point
sums (the gradient all-reduce / reduce-scatter, and which rows one rank sums),
so per-step losses and the final weights agree within the ``rounding`` fixture's
bounds (conftest.py's ``RoundingTolerance``: relative to the loss, growing with
the summed learning rate, from the spread benchmarks/parallel_spread.py measures);
data order, step counts, token counts and learning rates are exactly equal.
"""

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from preschool.train.trainer import train

STEPS = 12  # the slow runs: three stages of 4 steps

# Callbacks shared by the torchrun script and the in-process runs (one source, run in both places).
CALLBACKS = textwrap.dedent('''
    import json, os
    from preschool.train.callbacks import Callback

    class Order(Callback):
        """Appends the rows this rank trained on at each step to <out>/order-rank<r>.jsonl."""
        def on_train_start(self, trainer):
            self.path = os.path.join(trainer.out_dir, f"order-rank{trainer.rank}.jsonl")
            self.rows = []
        def extra_loss(self, model, batch, outputs):
            self.rows += [" ".join(map(str, r)) for r in batch["input_ids"].tolist()]
        def on_step_end(self, trainer):
            with open(self.path, "a") as fh:
                fh.write(json.dumps({"step": trainer.step, "rows": self.rows}) + "\\n")
            self.rows = []

    class Halt(Callback):
        """Stops (checkpoint, then return) at ``stop_at``; dies like a killed process at ``die_at``."""
        def __init__(self, stop_at=None, die_at=None):
            self.stop_at, self.die_at = stop_at, die_at
        def on_step_end(self, trainer):
            if trainer.step == self.die_at:
                os._exit(17)  # a killed process: no checkpoint, no cleanup
            if trainer.step == self.stop_at:
                trainer.should_stop = True

    class RootReshards(Callback):
        """Makes the FSDP root give back its gathered weights (embeddings, norm, LM head) after every forward,
        as the blocks do; FSDP2's default keeps them gathered until backward. Only a loss computed inside
        the root's forward sees the whole LM head then."""
        def on_train_start(self, trainer):
            trainer.model.set_reshard_after_forward(True)

    def compartments(job):
        """The compartment model and InfoNCE callbacks of a job with a "compartments" entry."""
        from preschool.compartments.infonce import InfoNCECallback, InfoNCEConfig
        from preschool.compartments.model import CompartmentModelConfig
        from preschool.compartments.model_callback import CompartmentModel
        from preschool.config import from_dict
        c, V, shards = job["compartments"]["c"], job["compartments"]["V"], job["compartments"]["train_shards"]
        return [CompartmentModel(c, V, CompartmentModelConfig()),
                InfoNCECallback(from_dict(InfoNCEConfig, job["compartments"]["infonce"]), c, V, train_shards=shards)]
''')

# One process of a torchrun job: runs the listed trainings in order in one process group.
SCRIPT = CALLBACKS + textwrap.dedent('''
    import sys
    from preschool.train.trainer import train

    import torch.distributed as dist
    dist.init_process_group("gloo")  # one group for all jobs (train() reuses it)
    for job in json.load(open(sys.argv[1])):
        callbacks = [Order(), Halt(job.get("stop_at"), job.get("die_at"))]
        if job.get("root_reshards"):
            callbacks.append(RootReshards())
        if "compartments" in job:
            callbacks += compartments(job)
        train(job["cfg"], job["out"], job["datasets"], callbacks=callbacks)
    dist.destroy_process_group()
''')

_ns: dict = {}
exec(CALLBACKS, _ns)
Order, Halt, RootReshards, compartments = _ns["Order"], _ns["Halt"], _ns["RootReshards"], _ns["compartments"]


def StopAt(step):
    return Halt(stop_at=step)


def run_jobs(torchrun, tmp: Path, name: str, jobs: list[dict]):
    (tmp / "script.py").write_text(SCRIPT)
    (tmp / f"{name}.json").write_text(json.dumps(jobs))
    return torchrun(tmp / "script.py", tmp / f"{name}.json")


def train_rows(run: Path) -> list[dict]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["event"] == "train"]


def data_order(run: Path) -> dict[int, list[str]]:
    """step -> sorted rows trained on at that step, over all ranks (a re-run step's last record wins)."""
    per_rank: dict[str, dict[int, list[str]]] = {}
    for f in sorted(run.glob("order-rank*.jsonl")):
        for r in map(json.loads, f.read_text().splitlines()):
            per_rank.setdefault(f.name, {})[r["step"]] = r["rows"]
    steps = sorted({s for d in per_rank.values() for s in d})
    return {s: sorted(x for d in per_rank.values() for x in d.get(s, [])) for s in steps}


def final_weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(sorted((run / "checkpoints").glob("step-*"))[-1] / "model.safetensors"))


def assert_same_curve(a: Path, b: Path, rounding=None) -> None:
    """The same steps, stages, tokens and LR; losses within ``rounding`` (conftest's RoundingTolerance),
    or bit-identical when it is None."""
    ra, rb = train_rows(a), train_rows(b)
    assert [(r["step"], r["stage"], r["tokens"], r["lr"]) for r in ra] == \
        [(r["step"], r["stage"], r["tokens"], r["lr"]) for r in rb]
    if rounding is not None:
        rounding.assert_same_losses(ra, rb)
    for x, y in zip(ra, rb):
        assert rounding is not None or x["loss"] == y["loss"], (x["step"], x["loss"], y["loss"])


def assert_same_weights(a: Path, b: Path, rounding=None) -> None:
    """The final checkpoints' weights agree within ``rounding``, or bit for bit when it is None."""
    wa, wb = final_weights(a), final_weights(b)
    if rounding is not None:
        rounding.assert_same_weights(wa, wb, train_rows(b))
        return
    assert sorted(wa) == sorted(wb)
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


def assert_resumed_like(run: Path, resumed_at: str, ref: Path, rounding=None) -> None:
    """``run`` finished after resuming from checkpoint ``resumed_at`` and trained what ``ref`` did:
    the same rows at every step, the same steps, stages, tokens and LR, and losses and weights
    (within ``rounding``, or bit-identical when it is None)."""
    summary = json.loads((run / "DONE").read_text())
    assert summary["resumed_from"].endswith(resumed_at) and summary["steps"] == STEPS
    assert data_order(run) == data_order(ref)
    assert_same_curve(run, ref, rounding)
    assert_same_weights(run, ref, rounding)


# --------------------------------------------------------------------------- fast: in the default run


def test_fsdp_two_ranks_match_one_process_and_write_a_plain_hf_folder(tmp_path, datasets, micro_cfg, torchrun,
                                                                      rounding):
    cfg = micro_cfg(stages=[{"name": "pt", "data": {"text": 1, "synth": 1}, "tokens": 4 * 16 * 3}],
                    checkpoint_every=3, micro_batch_size=1, attention_reset_between_docs=True, device="cpu",
                    eval_every=0, val_rows=3)  # 3 val rows: rank 1 scores a stand-in batch to match rank 0's forwards
    ds = {k: str(v) for k, v in datasets.items()}
    proc = run_jobs(torchrun, tmp_path, "jobs", [{"cfg": {**cfg, "parallel": "fsdp"}, "out": str(tmp_path / "fsdp"),
                                                  "datasets": ds}])
    assert proc.returncode == 0, proc.stderr[-3000:]
    train(cfg, tmp_path / "single", ds)
    assert_same_curve(tmp_path / "fsdp", tmp_path / "single", rounding)
    assert data_order(tmp_path / "fsdp").keys() == {1, 2, 3}
    val = [r for r in map(json.loads, (tmp_path / "fsdp" / "metrics.jsonl").read_text().splitlines())
           if r["event"] == "val"]
    ref = [r for r in map(json.loads, (tmp_path / "single" / "metrics.jsonl").read_text().splitlines())
           if r["event"] == "val"]
    rows = train_rows(tmp_path / "single")
    assert val[-1]["step"] == 3  # scored after all 3 updates
    assert val[-1]["val/text"] == pytest.approx(ref[-1]["val/text"], rel=rounding.loss_rtol(sum(r["lr"] for r in rows)))
    ck = tmp_path / "fsdp" / "checkpoints" / "step-00000003"
    man = json.loads((ck / "sharded" / "manifest.json").read_text())
    assert man["world_size"] == 2 and {"__0_0.distcp", "__1_0.distcp", ".metadata"} <= set(man["files"])
    assert not list((tmp_path / "fsdp" / "checkpoints").glob(".*"))  # no temp folders left behind
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(ck)  # plain transformers, no preschool code
    ref_w = final_weights(tmp_path / "single")
    rounding.assert_same_weights(m.state_dict(), {k: ref_w.get(k, ref_w["model.embed_tokens.weight"])
                                                  for k in m.state_dict()}, rows)


def _fused_loss_cfg(micro_cfg, tie: bool) -> dict:
    return micro_cfg(stages=[{"name": "pt", "data": {"text": 1, "synth": 1}, "tokens": 4 * 16 * 4}],
                     checkpoint_every=4, micro_batch_size=1, device="cpu", eval_every=0, parallel="fsdp",
                     model={"preset": "micro", "tie_embeddings": tie,
                            "overrides": {"hidden_size": 32, "intermediate_size": 64}})


def assert_fused_loss_like_plain(chunked: Path, off: Path, rounding) -> None:
    """The same 4 steps; losses and weights within ``rounding`` (the fused loss sums the same terms in
    another order, so the same AdamW amplification of cancelled gradients applies)."""
    assert len(train_rows(chunked)) == 4
    assert_same_curve(chunked, off, rounding)
    assert_same_weights(chunked, off, rounding)


def test_chunked_loss_under_fsdp_whose_root_reshards_equals_the_plain_loss(tmp_path, datasets, micro_cfg, rounding):
    """One rank, the root told to reshard after forward: outside the forward the LM head is a DTensor shard,
    so a loss computed after the forward cannot use it (the defect); the loss computed inside can."""
    ds = {k: str(v) for k, v in datasets.items()}
    cfg = _fused_loss_cfg(micro_cfg, tie=False)
    for loss in ("off", "chunked"):
        train({**cfg, "fused_loss": loss}, tmp_path / loss, ds, callbacks=[RootReshards()])
    assert_fused_loss_like_plain(tmp_path / "chunked", tmp_path / "off", rounding)


@pytest.mark.slow
def test_chunked_loss_under_two_rank_fsdp_equals_the_plain_loss(tmp_path, datasets, micro_cfg, torchrun, rounding):
    """2-rank FSDP in fp32, ``fused_loss: chunked`` vs ``off``: tied head with FSDP2's default root policy
    (gathered from forward to backward), untied head with a root that reshards after forward; and the same
    loss hook under 2-rank DDP (the loss is part of the DDP module's output)."""
    ds = {k: str(v) for k, v in datasets.items()}
    jobs = [{"cfg": {**_fused_loss_cfg(micro_cfg, tie), "fused_loss": loss},
             "out": str(tmp_path / f"{loss}-tie{int(tie)}"), "datasets": ds, "root_reshards": not tie}
            for tie in (True, False) for loss in ("off", "chunked")]
    jobs += [{"cfg": {**_fused_loss_cfg(micro_cfg, True), "parallel": "ddp", "fused_loss": loss},
              "out": str(tmp_path / f"{loss}-ddp"), "datasets": ds} for loss in ("off", "chunked")]
    proc = run_jobs(torchrun, tmp_path, "jobs", jobs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for run in ("tie1", "tie0", "ddp"):
        assert_fused_loss_like_plain(tmp_path / f"chunked-{run}", tmp_path / f"off-{run}", rounding)


def test_activation_checkpointing_changes_no_loss(tmp_path, datasets, micro_cfg):
    cfg = micro_cfg(micro_batch_size=2, device="cpu")
    ds = {k: str(v) for k, v in datasets.items()}
    train(cfg, tmp_path / "plain", ds)
    train({**cfg, "activation_checkpointing": "blocks"}, tmp_path / "ac", ds)
    # recomputation repeats the same fp32 ops: identical on CPU
    assert_same_curve(tmp_path / "plain", tmp_path / "ac")
    assert_same_weights(tmp_path / "plain", tmp_path / "ac")


def test_fsdp_one_process_equals_plain_and_resumes_exactly(tmp_path, datasets, micro_cfg):
    stages = [{"name": "a", "data": "synth", "tokens": 4 * 16 * 3, "group": "g"},
              {"name": "b", "data": {"text": 1, "synth": 1}, "tokens": 4 * 16 * 3, "embeddings_at_start": "reinit"},
              {"name": "c", "data": "synth", "tokens": 4 * 16 * 3, "group": "g"}]
    cfg = micro_cfg(stages=stages, micro_batch_size=2, checkpoint_every=2, device="cpu")
    ds = {k: str(v) for k, v in datasets.items()}
    train(cfg, tmp_path / "plain", ds)
    fsdp = {**cfg, "parallel": "fsdp"}
    train(fsdp, tmp_path / "fsdp", ds)
    assert_same_curve(tmp_path / "plain", tmp_path / "fsdp")
    # stop inside stage b, while group g's optimizer state is paused in the sharded checkpoint
    out = tmp_path / "resumed"
    train(fsdp, out, ds, callbacks=[StopAt(5)])
    st = torch.load(out / "checkpoints" / "step-00000005" / "trainer_state.pt", weights_only=True)
    assert st["optimizer"] is None and "optim" not in st["groups"]["g"]
    train(fsdp, out, ds)
    assert_same_curve(tmp_path / "fsdp", out)
    assert_same_weights(tmp_path / "fsdp", out)
    # keep_optimizer_state (2) prunes the sharded state together with trainer_state.pt
    ckpts = out / "checkpoints"
    assert sorted(p.parent.name for p in ckpts.glob("*/sharded")) == ["step-00000008", "step-00000009"]
    assert sorted(p.parent.name for p in ckpts.glob("*/trainer_state.pt")) == ["step-00000008", "step-00000009"]


@pytest.mark.parametrize("family", ["llama", "olmo2", "gpt_neox", "gpt2"])
def test_fsdp_shards_every_family_by_its_blocks_and_equals_plain(tmp_path, datasets, micro_cfg, family):
    """FSDP wraps each family's decoder blocks (GPT-2's are ``h``, not ``layers``) with activation
    checkpointing on, and one process trains what the plain model does, bit for bit."""
    cfg = micro_cfg(model={"preset": "micro", "family": family, "overrides": {"hidden_size": 32}},
                    stages=[{"name": "a", "data": "text", "tokens": 4 * 16 * 3}], micro_batch_size=2,
                    checkpoint_every=3, device="cpu")
    ds = {k: str(v) for k, v in datasets.items()}
    train(cfg, tmp_path / "plain", ds)
    train({**cfg, "parallel": "fsdp", "activation_checkpointing": "blocks"}, tmp_path / "fsdp", ds)
    assert_same_curve(tmp_path / "plain", tmp_path / "fsdp")
    assert_same_weights(tmp_path / "plain", tmp_path / "fsdp")
    assert (tmp_path / "fsdp" / "checkpoints" / "step-00000003" / "sharded").is_dir()


def test_damaged_sharded_checkpoint_is_named_and_skipped(tmp_path, datasets, micro_cfg, capfd):
    from preschool.errors import DataError

    cfg = micro_cfg(parallel="fsdp", device="cpu", checkpoint_every=2)
    ds = {k: str(v) for k, v in datasets.items()}
    out = tmp_path / "run"
    train(cfg, out, ds, callbacks=[StopAt(4)])
    for step in (4, 2):  # cut the newest shard short: the resume falls back to the previous checkpoint
        shard = out / "checkpoints" / f"step-{step:08d}" / "sharded" / "__0_0.distcp"
        shard.write_bytes(shard.read_bytes()[:-10])
        if step == 4:
            assert train(cfg, out, ds, callbacks=[StopAt(3)])["resumed_from"].endswith("step-00000002")
            assert "step-00000004/sharded/__0_0.distcp" in capfd.readouterr().err
    (out / "checkpoints" / "step-00000003" / "trainer_state.pt").unlink()  # none intact is left
    with pytest.raises(DataError, match="step-00000002/sharded/__0_0.distcp"):
        train(cfg, out, ds)


# --------------------------------------------------------------------------- slow: tens of steps, many runs
#
# One torchrun job runs every 2-rank training in turn (process start-up dominates on 2 cores); the last job is
# killed mid-run, and a second torchrun job resumes it. The tests below read the run folders.


def _compartment_data(root: Path, V: int = 20) -> dict[str, str]:
    """A 2-compartment offset dataset (30% translation rows) with one val set per compartment."""
    from preschool.compartments.dataset import CompartmentsConfig, write_compartment_val, write_compartmented
    from preschool.compartments.translation import TranslationConfig
    from preschool.data.shards import ShardWriter

    rng = np.random.default_rng(0)
    for split, n in (("train", 64), ("val", 8)):
        with ShardWriter(root / "base" / split, 9, V) as w:
            w.add_rows(rng.integers(0, V, (n, 9)))
    cfg = CompartmentsConfig(n_compartments=2, translation=TranslationConfig(fraction=0.3))
    write_compartmented(root / "base" / "train", root / "main" / "train", cfg)
    out = {"main": str(root / "main")}
    for name, p in write_compartment_val(root / "base" / "val", root / "vals", cfg).items():
        (root / name).mkdir()
        p.rename(root / name / "val")
        out[name] = str(root / name)
    return out


def slow_configs(micro_cfg, cdata: Path) -> tuple[dict, dict, dict, dict]:
    """The configs of the slow runs: (the three-stage micro run, the compartments run, InfoNCE with spans
    from the batch, InfoNCE with spans from the base training rows in ``cdata``: a job's "compartments")."""
    stages = [{"name": "a", "data": "synth", "tokens": 4 * 16 * 4, "group": "g"},
              {"name": "b", "data": {"text": 1, "synth": 1}, "tokens": 4 * 16 * 4, "embeddings_at_start": "reinit"},
              {"name": "c", "data": "synth", "tokens": 4 * 16 * 4, "group": "g"}]
    cfg = micro_cfg(stages=stages, micro_batch_size=1, checkpoint_every=3, eval_every=4, val_rows=5,
                    attention_reset_between_docs=True, device="cpu")
    ccfg = {"model": {"preset": "micro", "tie_embeddings": False}, "batch_size": 4, "micro_batch_size": 2, "lr": 1e-2,
            "progress": False, "log_every": 1, "eval_every": 4, "checkpoint_every": 4, "val": ["c0", "c1"], "val_rows": 4,
            "device": "cpu", "stages": [{"name": "s", "data": "main", "tokens": 4 * 8 * 10, "schedule": "constant"}]}
    # InfoNCE spans from the micro-batch (a rank short of 2 plain rows runs a stand-in under FSDP) and from
    # the base training rows (the paper's default)
    comp = {"c": 2, "V": 20, "train_shards": str(cdata / "base" / "train")}
    batch_spans = {**comp, "infonce": {"pair_batch": 2, "weight": 0.5, "spans": "batch"}}
    shard_spans = {**comp, "infonce": {"pair_batch": 4, "weight": 0.5, "span_len": 8}}
    return cfg, ccfg, batch_spans, shard_spans


@pytest.fixture(scope="module")
def runs(tmp_path_factory, module_datasets, micro_cfg, torchrun):
    tmp = tmp_path_factory.mktemp("fsdp_runs")
    ds = {k: str(v) for k, v in module_datasets.items()}
    cds = _compartment_data(tmp / "cdata")
    cfg, ccfg, batch_spans, shard_spans = slow_configs(micro_cfg, tmp / "cdata")
    fsdp = {**cfg, "parallel": "fsdp"}
    r = {k: tmp / k for k in ("single", "fsdp", "ddp", "fsdp_ac", "two2one", "one2two", "killed", "cmp_fsdp",
                              "cmp_ddp", "cmps_fsdp", "cmps_ddp")}

    train(cfg, r["single"], ds, callbacks=[Order()])
    train(fsdp, r["one2two"], ds, callbacks=[Order(), StopAt(7)])  # 1 rank, stopped inside stage b
    jobs = [{"cfg": fsdp, "out": str(r["fsdp"]), "datasets": ds},
            {"cfg": cfg, "out": str(r["ddp"]), "datasets": ds},
            {"cfg": {**fsdp, "activation_checkpointing": "blocks"}, "out": str(r["fsdp_ac"]), "datasets": ds},
            {"cfg": fsdp, "out": str(r["two2one"]), "datasets": ds, "stop_at": 5},
            {"cfg": fsdp, "out": str(r["one2two"]), "datasets": ds},
            {"cfg": {**ccfg, "parallel": "fsdp"}, "out": str(r["cmp_fsdp"]), "datasets": cds,
             "compartments": batch_spans},
            {"cfg": ccfg, "out": str(r["cmp_ddp"]), "datasets": cds, "compartments": batch_spans},
            {"cfg": {**ccfg, "parallel": "fsdp"}, "out": str(r["cmps_fsdp"]), "datasets": cds,
             "compartments": shard_spans},
            {"cfg": ccfg, "out": str(r["cmps_ddp"]), "datasets": cds, "compartments": shard_spans},
            {"cfg": fsdp, "out": str(r["killed"]), "datasets": ds, "die_at": 8}]
    (tmp / "script.py").write_text(SCRIPT)
    (tmp / "first.json").write_text(json.dumps(jobs))
    first = torchrun(tmp / "script.py", tmp / "first.json")
    (tmp / "second.json").write_text(json.dumps([jobs[-1] | {"die_at": None}]))
    second = torchrun(tmp / "script.py", tmp / "second.json")
    train(fsdp, r["two2one"], ds, callbacks=[Order()])  # 2 ranks -> 1
    return r, first, second


@pytest.mark.slow
def test_fsdp_ddp_and_one_process_give_the_same_curve(runs, rounding):
    r, first, _ = runs
    for k in ("fsdp", "ddp", "fsdp_ac", "cmp_fsdp", "cmp_ddp", "cmps_fsdp", "cmps_ddp"):
        assert (r[k] / "DONE").is_file(), first.stderr[-3000:]
    assert len(train_rows(r["fsdp"])) == STEPS
    assert data_order(r["fsdp"]) == data_order(r["ddp"]) == data_order(r["single"])
    for other in ("ddp", "single"):
        assert_same_curve(r["fsdp"], r[other], rounding)
        assert_same_weights(r["fsdp"], r[other], rounding)


@pytest.mark.slow
def test_fsdp_kill_and_resume_equals_the_uninterrupted_run(runs):
    r, first, second = runs
    assert first.returncode != 0 and "exitcode  : 17" in first.stderr  # the job was killed at step 8
    assert second.returncode == 0, second.stderr[-3000:]
    assert_resumed_like(r["killed"], "step-00000006", r["fsdp"])


@pytest.mark.slow
def test_fsdp_resume_on_another_world_size_continues_the_run(runs, rounding):
    r, _, _ = runs
    for k, resumed_at in (("two2one", "step-00000005"), ("one2two", "step-00000007")):
        assert_resumed_like(r[k], resumed_at, r["single"], rounding)
    man = json.loads((r["two2one"] / "checkpoints" / "step-00000012" / "sharded" / "manifest.json").read_text())
    assert man["world_size"] == 1


@pytest.mark.slow
def test_activation_checkpointing_under_fsdp_changes_no_loss(runs):
    r, _, _ = runs
    assert_same_curve(r["fsdp_ac"], r["fsdp"])
    assert_same_weights(r["fsdp_ac"], r["fsdp"])


@pytest.mark.slow
def test_infonce_compartments_run_under_fsdp(runs, rounding):
    from preschool.compartments.model import load_compartment_model

    r, _, _ = runs
    for fsdp, ddp in (("cmp_fsdp", "cmp_ddp"), ("cmps_fsdp", "cmps_ddp")):
        ck = sorted((r[fsdp] / "checkpoints").glob("step-*"))[-1]
        ref = sorted((r[ddp] / "checkpoints").glob("step-*"))[-1]
        # InfoNCE drew pairs (rank 0's count; under FSDP a rank without 2 plain rows ran a stand-in forward)
        calls = [torch.load(c / "trainer_state.pt", weights_only=True)["callbacks"] for c in (ck, ref)]
        assert [s for s in calls[0] if "calls" in s] == [s for s in calls[1] if "calls" in s] != [{"calls": 0}]
        assert_same_curve(r[fsdp], r[ddp], rounding)
        assert len(train_rows(r[fsdp])) == 10
        m, m_ref = load_compartment_model(ck), load_compartment_model(ref)
        rounding.assert_same_weights({"c": m.compartment_embedding.weight}, {"c": m_ref.compartment_embedding.weight},
                                     train_rows(r[ddp]))


@pytest.mark.slow
def test_hf_folder_written_under_fsdp_scores_minimal_pairs_like_ddp(runs):
    from transformers import AutoModelForCausalLM

    from preschool.evals.minimal_pairs import decide, score_token_ids

    r, _, _ = runs
    # pairs over the trained language (arithmetic progressions mod 64): in order vs two tokens swapped
    rng = np.random.default_rng(0)
    good = [list((s + np.arange(12)) % 64) for s in rng.integers(0, 64, 40)]
    bad = [g[:5] + [g[6], g[5]] + g[7:] for g in good]
    scores = {}
    for k in ("fsdp", "ddp"):
        m = AutoModelForCausalLM.from_pretrained(sorted((r[k] / "checkpoints").glob("step-*"))[-1])
        lp, _ = score_token_ids(m.eval(), good + bad)
        scores[k] = (lp[:40], lp[40:])
    (g1, b1), (g2, b2) = scores["fsdp"], scores["ddp"]
    np.testing.assert_allclose(np.r_[g1, b1], np.r_[g2, b2], atol=1e-3)
    assert [decide(x, y, 1e-5) for x, y in zip(g1, b1)] == [decide(x, y, 1e-5) for x, y in zip(g2, b2)]
    assert np.mean([decide(x, y, 1e-5) for x, y in zip(g1, b1)]) > 0.5  # the model learned the order


def test_a_worker_forked_after_a_failed_fsdp_run_finishes(tmp_path, datasets, micro_cfg):
    """A run that fails leaves its one-rank gloo process group in a reference cycle (through the traceback);
    the data engine's forked workers inherit it, and a worker whose collector freed it there hung for ever:
    the group's destructor waits on threads that fork does not copy (a test run stopped in a corpus build).
    A child forked by a process that imported the engine keeps what it inherits out of its collector."""
    import gc
    import os
    import signal
    import time

    import preschool.data.engine  # noqa: F401  (what the package's forked children do is set there)
    from preschool.train.callbacks import Callback

    class Crash(Callback):
        def on_step_end(self, trainer):
            if trainer.step == 6:
                raise RuntimeError("simulated")

    cfg = micro_cfg(parallel="fsdp", device="cpu", eval_every=0)
    try:
        train(cfg, tmp_path / "r", datasets, callbacks=[Crash()])
    except RuntimeError as e:
        assert "simulated" in str(e)
    train(cfg, tmp_path / "r", datasets)  # resumed to the end, in the same process
    pid = os.fork()
    if pid == 0:  # the child: what a worker's collector does when it runs
        gc.collect()
        os._exit(0)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("a child forked after the failed run hung in its garbage collector")
    assert os.waitstatus_to_exitcode(done[1]) == 0

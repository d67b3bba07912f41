"""preschool run --arm, prepare under a lock, and `preschool launch --slurm` job graphs (fake sbatch)."""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from preschool.cli import main
from preschool.experiment import load_experiment
from preschool.errors import ConfigError, DataError
from preschool.launch import slurm_jobs, SlurmOptions

ROOT = Path(__file__).resolve().parents[1]
PAPER = sorted((ROOT / "examples" / "paper").glob("*.yaml"))
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

# the quickstart at micro scale: seconds per arm on CPU
MICRO = ["model.preset=micro", "tokenizer.vocab_size=300", "tokenizer.sample_documents=200",
         "data.pt.tokens=20000", "data.pt.val_tokens=2048", "data.pt.unit_tokens=4096", "data.dyck.tokens=4000", "data.dyck.val_tokens=1024",
         "minimal_pairs.per_paradigm=2", "arms.0.stages.0.tokens=8000", "arms.1.stages.0.tokens=2048",
         "arms.1.stages.1.tokens=8000", "arms.2.stages.0.tokens=2048", "arms.2.stages.1.tokens=8000",
         "train.checkpoint_every=2"]


def _sets(out, extra=()):
    return [x for o in [f"out={out}", *MICRO, *extra] for x in ("--set", o)]


def test_run_arm_needs_prepared_data_and_says_how(tmp_path, capsys):
    qs = str(ROOT / "examples/quickstart.yaml")
    assert main(["run", qs, "--arm", "pt_only", *_sets(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "preschool prepare" in err and "model.preset=micro" in err
    assert not (tmp_path / "x" / "arms").exists()


def test_run_arm_rejects_unknown_arm_and_seed(tmp_path, capsys):
    qs = str(ROOT / "examples/quickstart.yaml")
    assert main(["run", qs, "--arm", "nope", *_sets(tmp_path / "x")]) == 2
    assert "no arm named 'nope'" in capsys.readouterr().err
    assert main(["run", qs, "--arm", "pt_only", "--seed", "7", *_sets(tmp_path / "x")]) == 2
    assert "seed 7" in capsys.readouterr().err


def test_prepare_then_one_arm_then_report_from_whatever_finished(tmp_path, capsys):
    qs = str(ROOT / "examples/quickstart.yaml")
    out = tmp_path / "qs"
    assert main(["prepare", qs, *_sets(out), "--no-progress"]) == 0
    assert not (out / ".preschool.lock").exists()  # the output lock is released when prepare ends
    assert main(["run", qs, "--arm", "ppt_dyck", "--seed", "0", *_sets(out), "--no-progress"]) == 0
    run = out / "arms" / "ppt_dyck" / "seed0"
    assert (run / "DONE").is_file()
    assert not (out / "arms" / "pt_only").exists()  # only the named arm trained
    # the report job: evaluates what exists and reports the other arms as unfinished
    assert main(["run", qs, "--only", "eval", "--only", "report", *_sets(out), "--no-progress"]) == 0
    report = (out / "report.md").read_text()
    assert "pt_only (unfinished)" in report and "| ppt_dyck |" in report
    assert list((run / "evals").glob("step-*/minimal_pairs/summary.json"))


def test_launch_submits_the_job_graph_with_fake_sbatch(tmp_path, monkeypatch, capsys):
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    cfg = ROOT / "examples/paper/verify_ppt_1b.yaml"
    assert main(["launch", str(cfg), "--slurm", "--nodes", "2", "--gpus-per-node", "4", "--partition", "gpu",
                 "--time", "48:00:00", "--account", "proj", "--set", "out=run"]) == 0
    rows = [line.split(" ", 1) for line in log.read_text().splitlines()]
    ids = {Path(args.split()[-1]).stem: jid for jid, args in rows}
    assert list(ids) == ["prepare", "pt_only-seed6", "dyck-seed6", "control-seed6", "report"]
    deps = {Path(args.split()[-1]).stem: re.search(r"--dependency=(\S+)", args) for _, args in rows}
    assert deps["prepare"] is None
    for arm in ("pt_only", "dyck", "control"):
        assert deps[f"{arm}-seed6"].group(1) == f"afterok:{ids['prepare']}"
    arm_ids = ":".join(ids[f"{a}-seed6"] for a in ("pt_only", "dyck", "control"))
    assert deps["report"].group(1) == f"afterany:{arm_ids}"
    assert all("--parsable" in args for _, args in rows)
    script = (tmp_path / "run/slurm/dyck-seed6.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --gpus-per-node=4" in script
    assert "#SBATCH --time=48:00:00" in script and "#SBATCH --account=proj" in script
    line = next(x for x in script.splitlines() if "torchrun --nnodes" in x)
    assert line.startswith("srun ")
    for piece in ('--nnodes "$SLURM_NNODES"', "--nproc-per-node 4", "--rdzv-backend c10d",
                  '--rdzv-endpoint "$head:$port"', '--rdzv-id "$SLURM_JOB_ID"', "-m preschool.cli run",
                  "--arm dyck --seed 6", "--set out=run"):
        assert piece in line
    assert "scontrol show hostnames" in script and "port=$(( 29500 + SLURM_JOB_ID % 1000 ))" in script
    out = capsys.readouterr().out
    assert "submitted report: job" in out


def test_compartments_init_from_arm_waits_for_its_source(tmp_path):
    exp = load_experiment(ROOT / "examples/compartments_infonce.yaml", [f"out={tmp_path}"])
    jobs = {j.name: j for j in slurm_jobs(exp, SlurmOptions(gpus_per_node=1))}
    assert exp.depends  # the example expands a trained c=1 arm
    for arm, src in exp.depends.items():
        assert f"{src}-seed{exp.seeds[0]}" in jobs[f"{arm}-seed{exp.seeds[0]}"].after_ok
    cmd = next(line for line in jobs["report"].script.splitlines() if line.startswith("srun"))
    assert "-m preschool.cli run " in cmd and "--only report" in cmd  # the one runner reports it


@pytest.mark.parametrize("path", PAPER + EXAMPLES, ids=lambda p: p.name)
def test_launch_dry_run_writes_scripts_that_parse(path, tmp_path, monkeypatch, capsys):
    from preschool.config import load_yaml

    if "shared/data" in path.read_text() and not (ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("needs ../shared/data")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no sbatch needed for a dry run
    assert main(["launch", str(path), "--slurm", "--gpus-per-node", "2", "--dry-run",
                 "--set", f"out={tmp_path}"]) == 0
    scripts = sorted((tmp_path / "slurm").glob("*.sbatch"))
    assert {p.stem for p in scripts} >= {"prepare", "report"} and len(scripts) >= 3
    for s in scripts:
        r = subprocess.run(["bash", "-n", str(s)], capture_output=True, text=True)
        assert r.returncode == 0, (s, r.stderr)
    out = capsys.readouterr().out
    assert "sbatch --parsable" in out and "--dependency=afterok:${PREPARE_ID}" in out


def test_launch_refuses_without_a_scheduler_and_bad_time(tmp_path, capsys):
    cfg = str(ROOT / "examples/quickstart.yaml")
    assert main(["launch", cfg, "--set", f"out={tmp_path}"]) == 2
    assert "--slurm" in capsys.readouterr().err
    assert main(["launch", cfg, "--slurm", "--time", "2 days", "--dry-run", "--set", f"out={tmp_path}"]) == 2
    assert "--time" in capsys.readouterr().err


def test_compartments_prepare_then_one_arm(tmp_path, capsys):
    cfg = str(ROOT / "examples/compartments_slowdown.yaml")
    sets = [x for o in [f"out={tmp_path / 'cm'}", "model.preset=micro", "data.base.tokens=20000",
                        "data.base.val_tokens=2048", "data.base.unit_tokens=4096", "arms.1.stages.0.tokens=2048",
                        "tokenizer.vocab_size=300",
                        "tokenizer.sample_documents=200"]
            for x in ("--set", o)]
    assert main(["run", cfg, "--arm", "c2", *sets, "--no-progress"]) == 2
    assert "preschool prepare" in capsys.readouterr().err
    assert main(["prepare", cfg, *sets, "--no-progress"]) == 0
    assert (tmp_path / "cm" / "data" / "base_c2" / "c1" / "val").is_dir()  # every derived set, once
    assert main(["run", cfg, "--arm", "c2", *sets, "--no-progress"]) == 0
    assert (tmp_path / "cm" / "arms" / "c2" / "seed0" / "DONE").is_file()
    assert not (tmp_path / "cm" / "arms" / "c1").exists()


# ----------------------------------------------------------------------------- cluster-real (issue 25)

def _fake_slurm(bin_dir: Path, log: Path, answer: str = '"$n;testcluster"', fail_at: int = 0,
                queue: bool = False) -> Path:
    """A fake Slurm in ``bin_dir``: sbatch records its arguments in ``log`` and answers ``answer`` (exit 1
    on call ``fail_at``); with ``queue`` each job it is given is queued (PENDING, with its script's
    comment) in ``<log>.queue``, which squeue prints (``%i|%T|%r|%k``); scancel records what it cancels in
    ``<log>.scancel`` and drops it from the queue; sinfo prints ``<log>.sinfo`` if written, else two 64-CPU
    nodes of 8 GPUs."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "sbatch").write_text(f"""#!/bin/bash
n=$(( $(wc -l < {log} 2>/dev/null || echo 0) + 1001 ))
echo "$n $*" >> {log}
if [ $n -eq {1000 + fail_at} ]; then echo "sbatch: error: Invalid generic resource (gres) specification" >&2; exit 1; fi
if {'true' if queue else 'false'}; then
  echo "$n|PENDING|None|$(sed -n 's/^#SBATCH --comment=//p' "${{@: -1}}")" >> {log}.queue
fi
echo {answer}
""")
    # scancel records its ids and takes them out of the fake queue, as Slurm does with a pending job
    (bin_dir / "scancel").write_text(f'#!/bin/bash\necho "$*" > {log}.scancel\n'
                                     f'for i in "$@"; do [ -f {log}.queue ] && sed -i "/^$i|/d" {log}.queue; done\n'
                                     'exit 0\n')
    (bin_dir / "squeue").write_text(f"#!/bin/bash\ncat {log}.queue 2>/dev/null || true\n")
    (bin_dir / "sinfo").write_text(f"""#!/bin/bash
if [ -f {log}.sinfo ]; then cat {log}.sinfo; else
  printf 'n1|gpu*|64|512000|gpu:8|infinite\\nn2|gpu*|64|512000|gpu:8|infinite\\n'; fi
""")
    for exe in ("sbatch", "scancel", "squeue", "sinfo"):
        (bin_dir / exe).chmod(0o755)
    return log


def _launch(cfg, *extra, out="run"):
    return main(["launch", str(cfg), "--slurm", "--set", f"out={out}", *extra])


def test_cpu_cluster_jobs_ask_no_gpu_and_every_resource_flag(tmp_path, monkeypatch):
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    assert _launch(ROOT / "examples/quickstart.yaml", "--gpus-per-node", "0", "--procs-per-node", "2",
                   "--cpus-per-task", "6", "--mem", "16G", "--partition", "cpu", "--qos", "low",
                   "--constraint", "avx512", "--time", "02:00:00", "--report-time", "00:30:00",
                   "--sbatch=--exclusive") == 0
    assert len(log.read_text().splitlines()) == 5
    scripts = {p.stem: p.read_text() for p in (tmp_path / "run/slurm").glob("*.sbatch")}
    for name, s in scripts.items():
        assert not [x for x in s.splitlines() if x.startswith("#SBATCH") and ("gpu" in x or "gres" in x)], name
        for line in ("#SBATCH --cpus-per-task=6", "#SBATCH --mem=16G", "#SBATCH --partition=cpu",
                     "#SBATCH --qos=low", "#SBATCH --constraint=avx512", "#SBATCH --exclusive"):
            assert line in s.splitlines(), (name, line)
    assert "#SBATCH --time=02:00:00" in scripts["pt_only-seed0"] and "#SBATCH --time=00:30:00" in scripts["report"]
    assert "--nproc-per-node 2 " in scripts["pt_only-seed0"]


def test_gpu_jobs_size_prepare_and_report_for_what_they_do(tmp_path):
    exp = load_experiment(ROOT / "examples/quickstart.yaml", [f"out={tmp_path}"])
    jobs = {j.name: j.script for j in slurm_jobs(exp, SlurmOptions(nodes=2, gpus_per_node=4))}
    assert "#SBATCH --gpus-per-node=4" in jobs["pt_only-seed0"] and "#SBATCH --nodes=2" in jobs["pt_only-seed0"]
    assert "--gpus-per-node" not in jobs["prepare"]  # data building needs no GPU
    # the evaluators run on the training device when that is CUDA: the report job asks one GPU
    assert "#SBATCH --gpus-per-node=1" in jobs["report"] and "#SBATCH --nodes=1" in jobs["report"]
    jobs = {j.name: j.script for j in slurm_jobs(exp, SlurmOptions(gpus_per_node=4, report_gpus=0))}
    assert "--gpus-per-node" not in jobs["report"]  # told otherwise: the evaluators fall back to the CPU
    jobs = {j.name: j.script for j in slurm_jobs(exp, SlurmOptions(gpus_per_node=0))}
    assert "--gpus-per-node" not in jobs["report"]  # CPU training, CPU evaluation


def test_every_job_sets_cpus_per_task_and_srun_passes_them_on(tmp_path):
    exp = load_experiment(ROOT / "examples/quickstart.yaml", [f"out={tmp_path}"])
    jobs = {j.name: j.script for j in slurm_jobs(exp, SlurmOptions(gpus_per_node=2))}
    assert "#SBATCH --cpus-per-task=8" in jobs["pt_only-seed0"].splitlines()  # 4 per process by default
    for name, s in jobs.items():
        assert any(line.startswith("#SBATCH --cpus-per-task=") for line in s.splitlines()), name
        srun = next(line for line in s.splitlines() if line.startswith("srun "))
        # Slurm 22.05's srun does not inherit sbatch's --cpus-per-task: without it the task gets one CPU
        assert '--cpus-per-task="$SLURM_CPUS_PER_TASK"' in srun, name


def test_rank_threads_divide_the_process_cpus_among_local_ranks(monkeypatch):
    import torch

    from preschool.experiment import rank_threads

    before = torch.get_num_threads()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    try:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
        assert rank_threads() is None and torch.get_num_threads() == before  # not under torchrun: untouched
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        assert rank_threads() == 4 and torch.get_num_threads() == 4
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "16")
        assert rank_threads() == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_threads_follow_the_slurm_allocation_where_slurm_does_not_confine_cpus(monkeypatch, capsys):
    """Under TaskPlugin=task/none the affinity mask is the whole node: a job given 1 CPU of 2 ran 2
    torch threads (issue 33 item 5). SLURM_CPUS_PER_TASK bounds it, with or without torchrun."""
    import torch

    from preschool.experiment import allocated_cpus, rank_threads

    before = torch.get_num_threads()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(2)))
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    try:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
        assert allocated_cpus() == (1, "SLURM_CPUS_PER_TASK")
        assert rank_threads() == 1 and torch.get_num_threads() == 1  # a job's python without torchrun
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
        assert rank_threads() == 1 and torch.get_num_threads() == 1
        assert "torch threads per rank: 1 (1 CPUs (SLURM_CPUS_PER_TASK) / 1 local ranks)" in capsys.readouterr().out
        # a confining Slurm's mask is already the allocation (and a larger SLURM_CPUS_PER_TASK never widens it)
        monkeypatch.setenv("SLURM_CPUS_PER_TASK", "8")
        assert allocated_cpus() == (2, "affinity mask")
    finally:
        torch.set_num_threads(before)


def test_a_failed_sbatch_cancels_the_jobs_already_submitted(tmp_path, monkeypatch, capsys):
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", fail_at=3)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    assert _launch(ROOT / "examples/quickstart.yaml", "--gpus-per-node", "1") == 2
    err = capsys.readouterr().err
    assert "Invalid generic resource" in err and "prepare (1001)" in err and "pt_only-seed0 (1002)" in err
    assert (tmp_path / "sbatch.log.scancel").read_text().split() == ["1001", "1002"]
    assert len(log.read_text().splitlines()) == 3  # nothing after the failure


def test_without_scancel_the_failure_prints_the_scancel_line(tmp_path, monkeypatch, capsys):
    _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", fail_at=2)
    (tmp_path / "bin" / "scancel").unlink()
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert _launch(ROOT / "examples/quickstart.yaml", "--gpus-per-node", "1") == 2
    assert "scancel 1001" in capsys.readouterr().err


@pytest.mark.parametrize("answer", ['"Submitted batch job"', '""', '"1001;c extra"'])
def test_an_sbatch_answer_without_a_job_id_stops_the_launch(answer, tmp_path, monkeypatch, capsys):
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", answer=answer)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    assert _launch(ROOT / "examples/quickstart.yaml", "--gpus-per-node", "1") == 2
    assert "printed no job id" in capsys.readouterr().err
    assert len(log.read_text().splitlines()) == 1  # no job gets --dependency=afterok:<garbage>


def test_a_script_that_does_not_parse_is_refused_before_submitting(tmp_path, monkeypatch, capsys):
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    assert _launch(ROOT / "examples/quickstart.yaml", "--setup", "source 'venv/bin/activate") == 2
    err = capsys.readouterr().err
    assert "--setup" in err and "bash -n" in err
    assert not log.exists()


MICRO_YAML = ROOT / "tests" / "launch_micro.yaml"  # two micro arms, a and b


def test_a_launch_after_prepare_submits_no_prepare_job(tmp_path, monkeypatch, capsys):
    cfg, out = MICRO_YAML, tmp_path / "out"
    assert main(["prepare", str(cfg), "--set", f"out={out}", "--no-progress"]) == 0
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert _launch(cfg, "--gpus-per-node", "0", "--cpus-per-task", "1", "--dry-run", out=out) == 0
    text = capsys.readouterr().out
    assert "skip prepare [done]: data prepared" in text and "would run: a-seed0, b-seed0, report" in text
    assert "afterok" not in text and not log.exists()
    assert _launch(cfg, "--gpus-per-node", "0", "--cpus-per-task", "1", out=out) == 0
    rows = log.read_text().splitlines()
    assert [Path(r.split()[-1]).stem for r in rows] == ["a-seed0", "b-seed0", "report"]
    assert "--dependency" not in rows[0] + rows[1] and "--dependency=afterany:1001:1002 " in rows[2]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The micro experiment run to the end with `preschool run` (config path, out folder)."""
    d = tmp_path_factory.mktemp("finished")
    assert main(["run", str(MICRO_YAML), "--set", f"out={d / 'out'}", "--no-progress"]) == 0
    return MICRO_YAML, d / "out"


def _run_script(path: Path, bin_dir: Path) -> None:
    """Run a generated job script as Slurm would on one node: srun runs its command (options dropped)."""
    (bin_dir / "srun").write_text('#!/bin/bash\nwhile [[ "$1" == -* ]]; do shift; done\nexec "$@"\n')
    (bin_dir / "srun").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SLURM_CPUS_PER_TASK": "1",
           "HF_HUB_OFFLINE": "1"}
    subprocess.run(["bash", str(path)], env=env, check=True, capture_output=True)


@pytest.mark.slow  # trains and reports a micro experiment, then runs its report job (~30 s of CPU)
def test_a_second_launch_submits_only_what_is_not_current(finished, tmp_path, monkeypatch, capsys):
    cfg, out = finished
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    # data and the arm are done: only the report (never written by a report job) is submitted, with no dependency
    assert _launch(cfg, "--gpus-per-node", "0", "--cpus-per-task", "1", out=out) == 0
    text = capsys.readouterr().out
    assert "skip prepare [done]" in text and "skip b-seed0 [done]" in text
    assert "skip a-seed0 [done]: finished with this config" in text
    rows = log.read_text().splitlines()
    assert len(rows) == 1 and rows[0].endswith("report.sbatch") and "--dependency" not in rows[0]
    # the report job runs (eval + report) and records it; then nothing is left to submit, dry or not
    _run_script(out / "slurm" / "report.sbatch", tmp_path / "bin")
    assert (out / "slurm" / "report.done").is_file()
    assert _launch(cfg, "--gpus-per-node", "0", "--cpus-per-task", "1", "--dry-run", out=out) == 0
    assert "nothing to run" in capsys.readouterr().out
    assert _launch(cfg, "--gpus-per-node", "0", "--cpus-per-task", "1", out=out) == 0
    assert "nothing to run" in capsys.readouterr().out
    assert len(log.read_text().splitlines()) == 1
    # another training config for the same run folder: refused before anything is submitted, naming the key
    # the user wrote (issue 48 item 14: it said arms[0].train.lr for a top-level train.lr)
    assert _launch(cfg, "--gpus-per-node", "0", "--set", "train.lr=0.01", out=out) == 2
    err = capsys.readouterr().err
    assert "error: train.lr: arm a seed 0" in err and "arms[0]" not in err and len(log.read_text().splitlines()) == 1
    # another data spec under trained runs (issue 48 item 4): refused, naming the run trained on it
    assert _launch(cfg, "--gpus-per-node", "0", "--set", "data.pt.tokens=7000", out=out) == 2
    err = capsys.readouterr().err
    assert "arm a seed 0 was trained on dataset 'pt'" in err and len(err.strip().splitlines()) == 1
    assert len(log.read_text().splitlines()) == 1
    # another eval/report config: the report runs again, the arm does not
    assert _launch(cfg, "--gpus-per-node", "0", "--set", "report.window=0.25", "--dry-run", out=out) == 0
    text = capsys.readouterr().out
    assert "would run: report" in text and "skip a-seed0" in text and "skip b-seed0" in text


# ----------------------------------------------------------------------------- shared clusters (issue 33)

def _on_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)


def test_arm_jobs_sharing_a_node_never_share_a_rendezvous(tmp_path):
    """Every arm job met at $head:29500, so a second job on the same node joined the first one's store
    and died when it ended (item 1): a one-node job uses torchrun --standalone (a free local port), a
    multi-node job a port derived from its job id."""
    exp = load_experiment(MICRO_YAML, [f"out={tmp_path}"])
    one = {j.name: j.script for j in slurm_jobs(exp, SlurmOptions(gpus_per_node=0))}
    line = next(x for x in one["a-seed0"].splitlines() if x.startswith("srun "))
    assert "torchrun --standalone --nnodes 1 " in line and "rdzv" not in line and "29500" not in one["a-seed0"]
    two = {j.name: j.script for j in slurm_jobs(exp, SlurmOptions(nodes=2, gpus_per_node=0, port=20000))}
    script = two["a-seed0"]
    assert '--rdzv-endpoint "$head:$port"' in script and "--standalone" not in script
    port_line = next(x for x in script.splitlines() if x.startswith("port="))
    ports = [subprocess.run(["bash", "-c", f'{port_line}; echo "$port"'], env={"SLURM_JOB_ID": str(i)},
                            capture_output=True, text=True, check=True).stdout.strip() for i in (41, 42, 1041)]
    assert ports[0] != ports[1] and all(20000 <= int(p) < 21000 for p in ports)
    with pytest.raises(ConfigError, match="--port"):
        SlurmOptions(port=65000).validate()  # no room for the job's offset


def _queue_rows(log: Path) -> list[str]:
    return log.with_name(log.name + ".queue").read_text().splitlines()


def test_a_relaunch_skips_the_jobs_slurm_still_holds(tmp_path, monkeypatch, capsys):
    """A relaunch while jobs are queued or running submitted them again (issue 33 item 2): launch finds its
    jobs with squeue by the comment each carries and submits only the rest, with their real ids as
    dependencies; a job that left the queue unfinished (failed) is submitted again, and the pending
    report, which would report without it, is cancelled and submitted after it (issue 40 item 3: two
    reports ran)."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1")
    assert _launch(MICRO_YAML, *args) == 0
    rows = _queue_rows(log)
    comments = [r.split("|")[3].split(":") for r in rows]
    assert [c[2] for c in comments] == ["prepare", "a-seed0", "b-seed0", "report"]
    assert all(c[0] == "preschool" and re.fullmatch("[0-9a-f]{12}", c[3]) for c in comments)  # + script hash
    capsys.readouterr()
    assert _launch(MICRO_YAML, *args) == 0
    text = capsys.readouterr().out
    assert ("keep a-seed0 [queued]: already in Slurm as job 1002 (PENDING, reason None) with the current script"
            in text and "nothing to run" in text)
    assert len(log.read_text().splitlines()) == 4  # nothing submitted twice
    # prepare runs, a-seed0 failed (it left the queue without DONE): only a-seed0 and a new report go
    queue = log.with_name(log.name + ".queue")
    queue.write_text("\n".join([rows[0].replace("PENDING", "RUNNING")] + rows[2:]) + "\n")
    assert _launch(MICRO_YAML, *args) == 0
    text = capsys.readouterr().out
    assert "keep prepare [queued]: already in Slurm as job 1001 (RUNNING" in text and "to run: a-seed0, report" in text
    assert "resubmit a-seed0 [failed]: job 1002 ended without finishing" in text
    assert "resubmit report [queued]: job 1004 (PENDING, reason None) waits on a-seed0, submitted again" in text
    new = log.read_text().splitlines()[4:]
    assert [Path(r.split()[-1]).stem for r in new] == ["a-seed0", "report"]
    assert "--dependency=afterok:1001 " in new[0] and "--dependency=afterany:1005:1003 " in new[1]
    # the old report is cancelled before the new one is submitted: one report job is left
    assert (tmp_path / "sbatch.log.scancel").read_text().split() == ["1004"]
    assert [r.split("|")[0] for r in _queue_rows(log) if ":report:" in r] == ["1006"]
    # another out folder of the same experiment name is another experiment: nothing of this one is skipped
    assert _launch(MICRO_YAML, *args, out="other") == 0
    assert "to run: prepare, a-seed0, b-seed0, report" in capsys.readouterr().out


def _queue_as(log: Path, states: dict[str, str]) -> None:
    """Rewrite the fake queue: job name -> ``STATE|REASON`` (``None``: the job left the queue)."""
    queue = log.with_name(log.name + ".queue")
    rows = []
    for r in queue.read_text().splitlines():
        name = r.split("|")[3].split(":")[2]
        if states.get(name, "") is not None:
            rows.append("|".join([r.split("|")[0], *(states.get(name) or "|".join(r.split("|")[1:3])).split("|"),
                                  r.split("|")[3]]))
    queue.write_text("".join(x + "\n" for x in rows))


def _submitted(log: Path, skip: int) -> dict[str, str]:
    """name -> sbatch arguments of the submissions after the first ``skip``."""
    return {Path(r.split()[-1]).stem: r for r in log.read_text().splitlines()[skip:]}


def test_a_relaunch_after_a_failed_prepare_resubmits_the_arms_that_can_never_start(tmp_path, monkeypatch, capsys):
    """Issue 40 item 1: prepare failed, the arm jobs sat PENDING (DependencyNeverSatisfied) and a relaunch
    counted them as queued, so the new prepare and report waited on arms that never start. They are
    never-runnable: cancelled and submitted again after the new prepare, and the report with them; an arm
    whose reason Slurm has not updated yet (still Dependency on the failed prepare) is never-runnable too."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1")
    assert _launch(MICRO_YAML, *args) == 0
    _queue_as(log, {"prepare": None, "a-seed0": "PENDING|DependencyNeverSatisfied", "b-seed0": "PENDING|Dependency",
                    "report": "PENDING|Dependency"})
    capsys.readouterr()
    assert _launch(MICRO_YAML, *args) == 0
    text = capsys.readouterr().out
    assert "resubmit prepare [failed]: job 1001 ended without finishing" in text
    assert "resubmit a-seed0 [never-runnable]: job 1002 (PENDING) can never start (reason Depend" in text
    assert "resubmit b-seed0 [never-runnable]: job 1003 (PENDING) can never start (it waits on prepare" in text
    assert "resubmit report [queued]: job 1004 (PENDING, reason Dependency) waits on a-seed0, b-seed0" in text
    assert sorted((tmp_path / "sbatch.log.scancel").read_text().split()) == ["1002", "1003", "1004"]
    new = _submitted(log, 4)
    assert list(new) == ["prepare", "a-seed0", "b-seed0", "report"]
    assert "--dependency=afterok:1005 " in new["a-seed0"] and "--dependency=afterany:1006:1007 " in new["report"]
    assert sorted(r.split("|")[0] for r in _queue_rows(log)) == ["1005", "1006", "1007", "1008"]
    record = json.loads((tmp_path / "run/slurm/jobs.json").read_text())
    assert {n: r["id"] for n, r in record.items()} == {"prepare": "1005", "a-seed0": "1006", "b-seed0": "1007",
                                                       "report": "1008"}


def test_a_relaunch_with_another_config_replaces_the_queued_jobs_stale_script(tmp_path, monkeypatch, capsys):
    """Issue 40 item 2: a relaunch with --set train.lr=0.01 while the jobs were held rewrote the .sbatch
    files, said "nothing to run", and the queued jobs ran the old script. Each job's comment carries its
    identity: a queued job whose identity is not the current one is stale, cancelled and resubmitted.
    Issue 48 item 5: every job was stale (every script carries every --set), and a train.lr change cancelled
    a running prepare. Only the jobs whose inputs changed are: arm a's training config and the report; not
    prepare (the data), nor arm b, which sets its own lr."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1", "--sbatch=--hold")
    assert _launch(MICRO_YAML, *args) == 0
    old = {r.split("|")[0]: r.split("|")[3] for r in _queue_rows(log)}
    capsys.readouterr()
    assert _launch(MICRO_YAML, *args, "--set", "train.lr=0.01") == 0
    text = capsys.readouterr().out
    for n, i in (("a-seed0", 1002), ("report", 1004)):
        assert f"resubmit {n} [stale]: job {i} (PENDING, reason None) runs another script" in text, text
    for n, i in (("prepare", 1001), ("b-seed0", 1003)):
        assert f"keep {n} [queued]: already in Slurm as job {i} (PENDING, reason None) with the current" in text
    assert sorted((tmp_path / "sbatch.log.scancel").read_text().split()) == ["1002", "1004"]
    new = _submitted(log, 4)
    assert list(new) == ["a-seed0", "report"]
    assert "--dependency=afterok:1001 " in new["a-seed0"] and "--dependency=afterany:1005:1003 " in new["report"]
    now = {r.split("|")[0]: r.split("|")[3] for r in _queue_rows(log)}
    assert sorted(now) == ["1001", "1003", "1005", "1006"] and now["1005"] != old["1002"] != now["1006"]
    assert "train.lr=0.01" in (tmp_path / "run/slurm/a-seed0.sbatch").read_text()
    # the same config again: every job is queued with the current script, nothing is submitted
    assert _launch(MICRO_YAML, *args, "--set", "train.lr=0.01") == 0
    text = capsys.readouterr().out
    assert "nothing to run" in text and text.count("[queued]: already in Slurm") == 4
    assert len(log.read_text().splitlines()) == 6
    # a change of what the data is made of makes every job stale, prepare first
    assert _launch(MICRO_YAML, *args, "--set", "train.lr=0.01", "--set", "data.pt.tokens=7000") == 0
    text = capsys.readouterr().out
    assert "resubmit prepare [stale]" in text and "to run: prepare, a-seed0, b-seed0, report" in text


def test_a_job_an_older_launch_queued_is_checked_by_the_script_slurm_holds(tmp_path, monkeypatch, capsys):
    """A comment without a script hash (a job submitted before launch recorded one) is checked with
    `scontrol write batch_script`: the script Slurm holds is hashed like the current one."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1")
    assert _launch(MICRO_YAML, *args) == 0
    queue = log.with_name(log.name + ".queue")
    queue.write_text("".join(r.rsplit(":", 1)[0] + "\n" for r in _queue_rows(log)))  # the old comment
    held = tmp_path / "held"
    held.mkdir()
    for r in _queue_rows(log):
        name = r.split("|")[3].split(":")[2]
        (held / r.split("|")[0]).write_text((tmp_path / "run/slurm" / f"{name}.sbatch").read_text())
    scontrol = f'#!/bin/bash\n[ "$1 $2 $4" = "write batch_script -" ] && cat {held}/$3\n'
    (tmp_path / "bin" / "scontrol").write_text(scontrol)
    (tmp_path / "bin" / "scontrol").chmod(0o755)
    capsys.readouterr()
    assert _launch(MICRO_YAML, *args) == 0
    text = capsys.readouterr().out
    assert "nothing to run" in text and text.count("[queued]: already in Slurm") == 4, text
    (held / "1003").write_text((held / "1003").read_text().replace("--seed 0", "--seed 0 --set train.lr=0.5"))
    assert _launch(MICRO_YAML, *args) == 0
    text = capsys.readouterr().out
    assert "resubmit b-seed0 [stale]: job 1003 (PENDING, reason None) runs another script" in text
    assert "to run: b-seed0, report" in text


def test_a_relaunch_right_after_scancel_resubmits_the_dying_job_after_it(tmp_path, monkeypatch, capsys):
    """Issue 40 item 5: a relaunch right after scancel took the COMPLETING job for a queued one and skipped
    it. A job that is ending unfinished is failed: submitted again with afterany on the dying job (so the
    two never hold the run folder at once), and the pending report with it; the dying job is not cancelled."""
    out = tmp_path / "out"
    assert main(["prepare", str(MICRO_YAML), "--set", f"out={out}", "--no-progress"]) == 0
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1")
    assert _launch(MICRO_YAML, *args, out=out) == 0
    _queue_as(log, {"a-seed0": "COMPLETING|None", "b-seed0": "RUNNING|None"})
    capsys.readouterr()
    assert _launch(MICRO_YAML, *args, out=out) == 0
    text = capsys.readouterr().out
    assert "resubmit a-seed0 [failed]: job 1001 is ending (COMPLETING) without finishing" in text
    assert "keep b-seed0 [queued]" in text and "to run: a-seed0, report" in text
    new = _submitted(log, 3)
    assert new["a-seed0"].split()[2:4] == ["--dependency=afterany:1001", str(out / "slurm" / "a-seed0.sbatch")]
    assert "--dependency=afterany:1004:1002 " in new["report"]
    assert (tmp_path / "sbatch.log.scancel").read_text().split() == ["1003"]  # the old report, not the dying job


def test_a_second_run_of_one_arm_stops_naming_the_first(tmp_path, capsys):
    """run --arm took no lock, so two jobs trained arms/a/seed0 at once (item 2): the second stops with
    one line naming the holder, and the run folder is untouched by it."""
    import sys

    out = tmp_path / "out"
    assert main(["prepare", str(MICRO_YAML), "--set", f"out={out}", "--no-progress"]) == 0
    run = out / "arms" / "a" / "seed0"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom preschool.lock import output_lock\n"
         "with output_lock(sys.argv[1], 'preschool run micro --arm a --seed 0'):\n"
         "    print('held', flush=True)\n    time.sleep(60)\n", str(run)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "SLURM_JOB_ID": "4242"})
    try:
        assert holder.stdout.readline().strip() == "held"
        capsys.readouterr()
        assert main(["run", str(MICRO_YAML), "--arm", "a", "--seed", "0", "--set", f"out={out}",
                     "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"pid {holder.pid}" in err and "(Slurm job 4242)" in err
        assert "preschool run micro --arm a --seed 0" in err
        assert not (run / "config.yaml").exists() and not (run / "metrics.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_of_a_slurm_job_that_ended_on_another_node_is_taken_over(tmp_path, monkeypatch, capsys):
    """A job killed at its time limit leaves its run folder's lock file; its resubmission may land on
    another node, where the pid cannot be checked: Slurm says the holder's job is gone."""
    import json as _json

    from preschool.experiment import run_lock

    _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log")
    (tmp_path / "bin" / "squeue").write_text(
        '#!/bin/bash\nif [[ "$*" == *--jobs=77* ]]; then echo RUNNING; elif [[ "$*" == *--jobs=78* ]]; then '
        'echo TIMEOUT; else echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; fi\n')
    _on_path(monkeypatch, tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    for job, taken in (("77", False), ("78", True), ("79", True)):  # running; ended (still listed); forgotten
        (run / ".preschool.lock").write_text(_json.dumps(
            {"pid": 1, "host": "node-elsewhere", "started": "x", "command": "preschool run --arm a", "slurm_job": job}))
        if taken:
            with run_lock(run, "preschool run --arm a (again)"):
                assert "taking over the stale lock" in capsys.readouterr().err
        else:
            with pytest.raises(DataError, match="Slurm job 77"):
                with run_lock(run, "preschool run --arm a (again)"):
                    pass


def test_an_sbatch_that_printed_no_id_but_queued_its_job_leaves_no_orphan(tmp_path, monkeypatch, capsys):
    """sbatch printed no id although the job was queued, and launch said "nothing was submitted" (item
    3): squeue finds the job by its comment and it is cancelled with the rest; without squeue the
    error names the job to look for."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", answer='"Submitted batch job"', queue=True)
    _on_path(monkeypatch, tmp_path)
    assert _launch(MICRO_YAML, "--gpus-per-node", "0") == 2
    err = capsys.readouterr().err
    assert "printed no job id" in err and "prepare, queued although sbatch printed no id (1001)" in err
    assert (tmp_path / "sbatch.log.scancel").read_text().split() == ["1001"]
    # no squeue at all (nor any other Slurm tool but the fake sbatch): only the tools the scripts use
    tools = tmp_path / "tools"
    tools.mkdir()
    for exe in ("bash", "wc", "sed", "cat"):
        (tools / exe).symlink_to(shutil.which(exe))
    (tmp_path / "bin" / "squeue").unlink()
    (tmp_path / "bin" / "sinfo").unlink()
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{tools}")
    log.unlink()
    assert _launch(MICRO_YAML, "--gpus-per-node", "0", out="run2") == 2
    err = capsys.readouterr().err
    assert "sbatch may still have queued it: look for job name micro-prepare with comment preschool:" in err
    assert len(err.strip().splitlines()) == 1


def _sinfo(log: Path, *rows: str) -> None:
    log.with_name(log.name + ".sinfo").write_text("".join(r + "\n" for r in rows))


@pytest.mark.parametrize("extra, flag, says", [
    (("--cpus-per-task", "4"), "--cpus-per-task", "ask 4 CPUs on a node, but the largest node of partition cpu has 2"),
    (("--nodes", "2"), "--nodes", "ask 2 nodes, but partition cpu has 1"),
    (("--mem", "64G"), "--mem", "asks 64G per node, but the largest node of partition cpu has 3900M"),
    (("--time", "02:00:00"), "--time", "over the time limit of partition cpu (1:00:00"),
    (("--gpus-per-node", "1"), "--gpus-per-node",
     "ask 1 GPUs on a node, but the nodes of partition cpu have at most 0"),
    (("--partition", "gpu"), "--partition", "sinfo lists no node in partition 'gpu'"),
    # issue 40 item 6: the refusal said "the prepare and report jobs ask 1 GPUs"; prepare asks none
    (("--report-gpus", "1"), "--report-gpus", "the report job asks 1 GPUs on a node, but the nodes of partition cpu "
                                              "have at most 0"),
])
def test_a_request_the_partition_can_never_run_is_refused_before_submitting(extra, flag, says, tmp_path,
                                                                             monkeypatch, capsys):
    """--cpus-per-task 4 on a 2-CPU partition was accepted and stayed pending forever (item 4)."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log")
    _sinfo(log, "node1|cpu*|2|3900|(null)|1:00:00", "node1|big|2|3900|(null)|infinite")
    if flag == "--partition":  # sinfo --partition=gpu lists nothing
        (tmp_path / "bin" / "sinfo").write_text("#!/bin/bash\nexit 0\n")
    _on_path(monkeypatch, tmp_path)
    opts = ["--gpus-per-node", "0", "--cpus-per-task", "1"]
    assert _launch(MICRO_YAML, *(opts + list(extra))) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"error: {flag}: " in err and says in err, err
    assert not log.exists()  # nothing submitted
    if flag != "--partition":
        assert _launch(MICRO_YAML, *opts) == 0  # what fits is submitted
        assert "partition cpu: 1 node(s), up to 2 CPUs" in capsys.readouterr().out


def test_status_shows_states_reasons_and_a_failed_jobs_log(tmp_path, monkeypatch, capsys):
    """launch --status: each job's state and Slurm's reason, and the tail of a job that ended
    unfinished, so nobody has to read squeue (item 4)."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    (tmp_path / "bin" / "sacct").write_text('#!/bin/bash\necho FAILED\n')
    (tmp_path / "bin" / "sacct").chmod(0o755)
    _on_path(monkeypatch, tmp_path)
    assert main(["launch", str(MICRO_YAML), "--status", "--set", "out=run"]) == 0
    assert "a-seed0: not submitted" in capsys.readouterr().out
    assert _launch(MICRO_YAML, "--gpus-per-node", "0", "--cpus-per-task", "1") == 0
    rows = _queue_rows(log)
    queue = log.with_name(log.name + ".queue")
    queue.write_text("\n".join([rows[0].replace("PENDING|None", "RUNNING|None"),
                                rows[1].replace("None", "Dependency")] + rows[3:]) + "\n")
    (tmp_path / "run/slurm/logs/micro-b-seed0-1003.out").write_text(
        "".join(f"line {i}\n" for i in range(30)) + "RuntimeError: boom\n")
    capsys.readouterr()
    assert main(["launch", str(MICRO_YAML), "--status", "--set", "out=run"]) == 0
    text = capsys.readouterr().out
    assert "prepare: RUNNING as job 1001 (reason None)" in text
    assert "a-seed0: PENDING as job 1002 (reason Dependency)" in text
    assert "b-seed0: job 1003 ended without finishing (FAILED)" in text
    assert "RuntimeError: boom" in text and "line 21" in text and "line 20\n" not in text
    assert "report: PENDING as job 1004" in text


def test_status_shows_the_recorded_job_stale_and_never_runnable_ones(tmp_path, monkeypatch, capsys):
    """Issue 40 item 3: with an old report still queued beside the new one, --status showed the old one's
    id (squeue's first), not the one jobs.json records; a stale or never-runnable job is said to be one."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    assert _launch(MICRO_YAML, "--gpus-per-node", "0", "--cpus-per-task", "1") == 0
    queue = log.with_name(log.name + ".queue")
    rows = queue.read_text().splitlines()
    record = tmp_path / "run/slurm/jobs.json"
    jobs = json.loads(record.read_text())
    jobs["report"]["id"] = "1010"
    record.write_text(json.dumps(jobs))
    stale = rows[2].rsplit(":", 1)[0] + ":0123456789ab"
    queue.write_text("\n".join([rows[0], rows[1].replace("None", "DependencyNeverSatisfied"), stale, rows[3],
                                rows[3].replace("1004|", "1010|")]) + "\n")
    capsys.readouterr()
    assert main(["launch", str(MICRO_YAML), "--status", "--set", "out=run"]) == 0
    text = capsys.readouterr().out
    assert "report: PENDING as job 1010 (reason None)" in text and "1004" not in text
    assert "a-seed0: PENDING as job 1002 (reason DependencyNeverSatisfied); it can never start" in text
    assert "b-seed0: PENDING as job 1003 (reason None); it runs another script than the current one" in text


def test_status_without_the_controller_reads_jobs_json_and_the_run_folders(tmp_path, monkeypatch, capsys):
    """Issue 40 item 4: with the controller unreachable --status printed nothing (exit 2, "nothing was
    submitted"); it says so and shows what jobs.json and the run folders tell, and a launch still stops."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    assert _launch(MICRO_YAML, "--gpus-per-node", "0", "--cpus-per-task", "1") == 0
    (tmp_path / "bin" / "squeue").write_text(
        "#!/bin/bash\necho 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n")
    capsys.readouterr()
    assert main(["launch", str(MICRO_YAML), "--status", "--set", "out=run"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("(the Slurm controller cannot be reached: squeue failed (exit 1: slurm_load_jobs error:")
    assert "a-seed0: job 1002 was submitted (the current script); its state is unknown" in text
    assert "report: job 1004 was submitted (the current script)" in text
    assert _launch(MICRO_YAML, "--gpus-per-node", "0", "--cpus-per-task", "1") == 2
    assert "cannot be told apart, so nothing was submitted" in capsys.readouterr().err
    assert len(log.read_text().splitlines()) == 4


def test_a_report_is_not_resubmitted_when_only_prepare_is(tmp_path, monkeypatch, capsys):
    """Issue 40 item 3: when only prepare was submitted again, a second report was submitted although no arm
    it covers was (docs/scale.md says the queued report is kept then). Running arms keep their inputs."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    assert _launch(MICRO_YAML, "--gpus-per-node", "0", "--cpus-per-task", "1") == 0
    _queue_as(log, {"prepare": None, "a-seed0": "RUNNING|None", "b-seed0": "RUNNING|None"})
    capsys.readouterr()
    assert _launch(MICRO_YAML, "--gpus-per-node", "0", "--cpus-per-task", "1") == 0
    text = capsys.readouterr().out
    assert "to run: prepare\n" in text and "keep report [queued]" in text
    assert list(_submitted(log, 4)) == ["prepare"] and not (tmp_path / "sbatch.log.scancel").exists()


def test_launch_without_sbatch_writes_nothing(tmp_path, monkeypatch, capsys):
    """Issue 40 item 16: `launch --slurm` without sbatch wrote its job scripts, then refused."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for exe in ("bash",):
        (tools / exe).symlink_to(shutil.which(exe))
    monkeypatch.setenv("PATH", str(tools))
    monkeypatch.chdir(tmp_path)
    assert _launch(MICRO_YAML, "--gpus-per-node", "0") == 2
    err = capsys.readouterr().err
    assert "sbatch not found on PATH" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
    assert _launch(MICRO_YAML, "--gpus-per-node", "0", "--dry-run") == 0  # a dry run needs no sbatch
    assert (tmp_path / "run/slurm/a-seed0.sbatch").is_file()


def test_scale_doc_says_what_prepare_and_report_ask():
    """Issue 40 item 6: docs/scale.md said prepare and report ask the CPUs of one process; they ask the whole
    --cpus-per-task (default 4), and only the report job asks --report-gpus."""
    text = (ROOT / "docs/scale.md").read_text()
    assert "the CPUs of one process" not in text
    exp = load_experiment(MICRO_YAML, ["out=x"])
    jobs = {j.name: j.script for j in slurm_jobs(exp, SlurmOptions(gpus_per_node=2, cpus_per_task=12, report_gpus=1))}
    for name in ("prepare", "report"):
        assert "#SBATCH --cpus-per-task=12" in jobs[name].splitlines()
    assert "--gpus-per-node" not in jobs["prepare"] and "#SBATCH --gpus-per-node=1" in jobs["report"]
    assert "prepare and report jobs ask one node and the whole `--cpus-per-task`" in text


def test_a_dry_run_prints_a_submission_script_that_runs_as_it_is(tmp_path, monkeypatch, capsys):
    """--dry-run printed sbatch lines with ${PREPARE_ID} placeholders nothing filled (item 9): the script
    it prints (and writes to <out>/slurm/submit.sh) submits the graph with the real ids."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log")
    _on_path(monkeypatch, tmp_path)
    assert _launch(MICRO_YAML, "--gpus-per-node", "0", "--cpus-per-task", "1", "--dry-run") == 0
    text = capsys.readouterr().out
    assert not log.exists()
    script = text[text.index("#!/bin/bash\n# submits"):].rstrip("\n") + "\n"
    assert script == (tmp_path / "run/slurm/submit.sh").read_text()
    res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=os.environ.copy())
    assert res.returncode == 0, res.stderr
    assert "submitted report: job 1004" in res.stdout
    rows = {Path(r.split()[-1]).stem: r for r in log.read_text().splitlines()}
    assert "--dependency" not in rows["prepare"]
    assert "--dependency=afterok:1001 " in rows["a-seed0"] and "--dependency=afterok:1001 " in rows["b-seed0"]
    assert "--dependency=afterany:1002:1003 " in rows["report"]


def test_the_prepare_job_forks_one_worker_per_cpu_it_was_given(tmp_path, monkeypatch):
    """Issue 48 item 8: the prepare job forked one worker per core of the node (os.cpu_count(): 128 on a
    128-core node that gave it 4 CPUs); `preschool prepare` without --workers takes the CPUs allocated to it."""
    import preschool.experiment

    seen = []

    def prepare(exp, **kw):
        seen.append(exp.cfg.workers)
        return {"datasets": {}, "tokenizer": {"vocab_size": 0, "sha256": "0" * 64}}

    monkeypatch.setattr(preschool.experiment, "prepare_experiment", prepare)
    monkeypatch.setattr(os, "cpu_count", lambda: 128)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(128)))  # a Slurm that does not confine
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "4")
    assert main(["prepare", str(MICRO_YAML), "--set", f"out={tmp_path}", "--no-progress"]) == 0
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})  # a task bound to 3 CPUs (affinity)
    assert main(["prepare", str(MICRO_YAML), "--set", f"out={tmp_path}", "--no-progress"]) == 0
    assert main(["prepare", str(MICRO_YAML), "--set", f"out={tmp_path}", "--no-progress", "--workers", "2"]) == 0
    assert seen == [4, 3, 2]


# ----------------------------------------------------------------------------- relaunch rules (issue 48)

def test_a_relaunch_without_a_seed_cancels_its_jobs_and_status_sees_them(tmp_path, monkeypatch, capsys):
    """Issue 48 item 3: seeds taken out of the config left their queued jobs running, unseen by the relaunch and
    by --status (they finished and wrote arms/*/seed1/DONE while the report said seeds [0]). Jobs of this folder
    that name no job of the graph are cancelled and said; the jobs of the seeds kept stay queued."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1", "--sbatch=--hold")
    assert _launch(MICRO_YAML, *args, "--set", "seeds=[0,1]") == 0
    names = [r.split("|")[3].split(":")[2] for r in _queue_rows(log)]
    assert names == ["prepare", "a-seed0", "b-seed0", "a-seed1", "b-seed1", "report"]
    _queue_as(log, {"a-seed1": "RUNNING|None"})
    capsys.readouterr()
    assert main(["launch", str(MICRO_YAML), "--status", "--set", "out=run"]) == 0  # seeds: [0]
    text = capsys.readouterr().out
    assert ("a-seed1: RUNNING as job 1004 (reason None); it is no job of the current config (its arm, seed or rung "
            "was taken out of it): `preschool launch` again cancels it") in text
    assert "b-seed1: PENDING as job 1005" in text and "a-seed0: PENDING as job 1002 (reason None)\n" in text
    assert _launch(MICRO_YAML, *args) == 0
    text = capsys.readouterr().out
    assert "cancel a-seed1 [removed]: job 1004 (RUNNING, reason None) is no job of the current config" in text
    assert "cancel b-seed1 [removed]: job 1005 (PENDING, reason None)" in text
    assert "keep prepare [queued]" in text and "keep a-seed0 [queued]" in text and "keep b-seed0 [queued]" in text
    assert sorted((tmp_path / "sbatch.log.scancel").read_text().split()) == ["1004", "1005", "1006"]
    assert list(_submitted(log, 6)) == ["report"]  # the report of seeds [0] only
    assert sorted(r.split("|")[0] for r in _queue_rows(log)) == ["1001", "1002", "1003", "1007"]
    # nothing left to remove: a launch again keeps everything and cancels nothing more
    (tmp_path / "sbatch.log.scancel").unlink()
    assert _launch(MICRO_YAML, *args) == 0
    assert "nothing to run" in capsys.readouterr().out and not (tmp_path / "sbatch.log.scancel").exists()


def test_jobs_held_on_a_removed_arm_and_a_cancelled_prepare_are_cancelled_with_nothing_else_to_run(
        tmp_path, monkeypatch, capsys):
    """Issue 48 item 3: jobs held on a cancelled prepare waited for ever. An arm taken out of a finished-enough
    experiment whose only queued jobs are its own: the launch has nothing to submit, and still cancels them."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1")
    assert _launch(MICRO_YAML, *args) == 0
    # prepare was cancelled by hand; the arms wait on it for ever
    _queue_as(log, {"prepare": None, "a-seed0": "PENDING|DependencyNeverSatisfied",
                    "b-seed0": "PENDING|DependencyNeverSatisfied", "report": None})
    queue = log.with_name(log.name + ".queue")
    queue.write_text(queue.read_text().replace(":b-seed0:", ":c-seed0:"))  # an arm c, since taken out
    capsys.readouterr()
    assert _launch(MICRO_YAML, *args) == 0
    text = capsys.readouterr().out
    assert "cancel c-seed0 [removed]: job 1003 (PENDING, reason DependencyNeverSatisfied)" in text
    assert "1003" in (tmp_path / "sbatch.log.scancel").read_text().split()
    assert not [r for r in _queue_rows(log) if ":c-seed0:" in r]


def test_two_launches_at_once_submit_the_graph_once(tmp_path, monkeypatch):
    """Issue 48 item 6: two `launch` commands at once both read an empty queue and both submitted the whole
    graph (8 jobs, two reports ran). The queue read -> submit -> jobs.json write is under the lock of
    <out>/slurm: the second launch waits for the first, then finds every job queued with the current script."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    sbatch = tmp_path / "bin" / "sbatch"
    sbatch.write_text(sbatch.read_text().replace("#!/bin/bash\n", "#!/bin/bash\nsleep 0.5\n", 1))  # a busy controller
    _on_path(monkeypatch, tmp_path)
    cmd = [sys.executable, "-m", "preschool.cli", "launch", str(MICRO_YAML), "--slurm", "--set", "out=run",
           "--gpus-per-node", "0", "--cpus-per-task", "1"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert len(log.read_text().splitlines()) == 4, outs  # prepare, a-seed0, b-seed0, report: once
    said = [o + e for o, e in outs]
    assert sum("nothing to run" in x for x in said) == 1
    assert any("waiting for" in x and "preschool launch" in x for x in said)
    record = json.loads((tmp_path / "run/slurm/jobs.json").read_text())
    assert {n: r["id"] for n, r in record.items()} == {"prepare": "1001", "a-seed0": "1002", "b-seed0": "1003",
                                                       "report": "1004"}


def test_the_job_environment_is_part_of_each_jobs_identity(tmp_path, monkeypatch, capsys):
    """Issue 48 item 7: a relaunch without PRESCHOOL_PLUGINS kept the queued jobs whose saved environment still
    loaded a plug-in (one overriding `micro`). The scripts export the environment preschool reads, so it is part
    of each job's identity: the relaunch replaces them, and their scripts no longer load it."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    plugin = tmp_path / "my_parts.py"
    plugin.write_text("# a plug-in with no parts of its own\n")
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1", "--sbatch=--hold")
    monkeypatch.setenv("PRESCHOOL_PLUGINS", str(plugin))
    assert _launch(MICRO_YAML, *args) == 0
    assert f"export PRESCHOOL_PLUGINS={plugin}\n" in (tmp_path / "run/slurm/a-seed0.sbatch").read_text()
    monkeypatch.delenv("PRESCHOOL_PLUGINS")
    capsys.readouterr()
    assert _launch(MICRO_YAML, *args) == 0
    text = capsys.readouterr().out
    for n, i in (("prepare", 1001), ("a-seed0", 1002), ("b-seed0", 1003), ("report", 1004)):
        assert f"resubmit {n} [stale]: job {i} (PENDING, reason None) runs another script" in text, text
    assert "PRESCHOOL_PLUGINS" not in (tmp_path / "run/slurm/a-seed0.sbatch").read_text()


def test_status_says_what_a_resubmission_keeps_and_a_failed_setup_leaves_a_log(tmp_path, monkeypatch, capsys):
    """Issue 48 item 14: --status said a failed prepare "resumes from its last checkpoint" (it has none; an arm
    without a checkpoint has none either), and a job stopped by a failing --setup line left an empty log under
    an empty "last lines of" header. What a resubmission keeps is read from the job's outputs; the script says
    in its log where it stopped; an empty log is said to be empty."""
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    (tmp_path / "bin" / "sacct").write_text('#!/bin/bash\necho FAILED\n')
    (tmp_path / "bin" / "sacct").chmod(0o755)
    _on_path(monkeypatch, tmp_path)
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1", "--setup", "[ -e okflag ] || exit 1")
    assert _launch(MICRO_YAML, *args) == 0
    # the prepare job runs as Slurm would and stops in its --setup line
    (tmp_path / "bin" / "srun").write_text('#!/bin/bash\nwhile [[ "$1" == -* ]]; do shift; done\nexec "$@"\n')
    (tmp_path / "bin" / "srun").chmod(0o755)
    res = subprocess.run(["bash", str(tmp_path / "run/slurm/prepare.sbatch")], capture_output=True, text=True,
                         cwd=tmp_path)
    assert res.returncode == 1
    assert res.stdout + res.stderr == "[preschool] the job script stopped with exit 1 in its --setup lines\n"
    logs = tmp_path / "run/slurm/logs"
    (logs / "micro-prepare-1001.out").write_text(res.stdout + res.stderr)
    (logs / "micro-a-seed0-1002.out").write_text("")  # a log of a job that printed nothing at all
    ck = tmp_path / "run/arms/b/seed0/checkpoints/step-40"
    ck.mkdir(parents=True)
    _queue_as(log, {"prepare": None, "a-seed0": None, "b-seed0": None})
    capsys.readouterr()
    assert main(["launch", str(MICRO_YAML), "--status", "--set", "out=run"]) == 0
    text = capsys.readouterr().out
    assert ("prepare: job 1001 ended without finishing (FAILED); `preschool launch` again resubmits it (it keeps "
            "the datasets and work units already built)\n  last lines of") in text
    assert "    [preschool] the job script stopped with exit 1 in its --setup lines" in text
    assert ("a-seed0: job 1002 ended without finishing (FAILED); `preschool launch` again resubmits it (it starts "
            "from the beginning: no checkpoint was written yet)\n  its log") in text
    assert "micro-a-seed0-1002.out is empty: the job ended before printing anything" in text
    assert "b-seed0: job 1003 ended without finishing (FAILED); `preschool launch` again resubmits it (it resumes " \
           "from step 40, its last checkpoint)" in text
    assert "last lines of" not in text.split("a-seed0:")[1].split("b-seed0:")[0]


def test_a_changed_data_spec_is_refused_before_anything_is_submitted(tmp_path, monkeypatch, capsys):
    """Issue 48 item 4: with another data spec over prepared data, launch said the COMPLETED jobs "ended without
    finishing", submitted a graph whose prepare then failed asking for --rebuild (which launch lacks), exited 0,
    and its arms sat at DependencyNeverSatisfied. Launch runs the stale-data check and refuses in one line, as
    for a changed training config, saying how to rebuild; nothing is submitted or written."""
    out = tmp_path / "out"
    assert main(["prepare", str(MICRO_YAML), "--set", f"out={out}", "--no-progress"]) == 0
    log = _fake_slurm(tmp_path / "bin", tmp_path / "sbatch.log", queue=True)
    _on_path(monkeypatch, tmp_path)
    args = ("--gpus-per-node", "0", "--cpus-per-task", "1")
    assert _launch(MICRO_YAML, *args, out=out) == 0
    record = (out / "slurm/jobs.json").read_text()
    capsys.readouterr()
    assert _launch(MICRO_YAML, *args, "--set", "data.pt.tokens=7000", out=out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("preschool launch: error: "), err
    assert "dataset 'pt' was prepared with another data.pt.tokens (" in err and "nothing was submitted" in err
    assert "preschool prepare" in err and "--set data.pt.tokens=7000" in err and "--rebuild" in err
    assert len(log.read_text().splitlines()) == 3 and (out / "slurm/jobs.json").read_text() == record
    assert "data.pt.tokens=7000" not in (out / "slurm/a-seed0.sbatch").read_text()  # the last launch's scripts
    assert _launch(MICRO_YAML, *args, "--set", "data.pt.tokens=7000", "--dry-run", out=out) == 2  # a dry run too


def test_a_branch_job_and_a_run_started_from_another_arm_wait_for_their_parents_job(tmp_path):
    """#47: jobs are submitted parents first, and each run job depends (afterok) on the job of the run it starts
    from and of the run whose shared prefix it continues; a run that starts from nothing keeps its identity."""
    exp = load_experiment(ROOT / "examples/quickstart.yaml",
                          [f"out={tmp_path}", "arms.0.train={init_from: {arm: ppt_dyck, stage: ppt}}"])
    jobs = slurm_jobs(exp, SlurmOptions(gpus_per_node=1))
    names = [j.name for j in jobs]
    by = {j.name: j for j in jobs}
    assert "ppt_dyck-seed0" in by["pt_only-seed0"].after_ok  # pt_only starts from ppt_dyck's PPT stage
    assert "ppt_dyck-seed0" in by["ppt_dyck_reinit-seed0"].after_ok  # the shared PPT stage
    assert names.index("ppt_dyck-seed0") < names.index("pt_only-seed0")
    plain = load_experiment(ROOT / "examples/quickstart.yaml", [f"out={tmp_path}", "arms=[{name: pt_only, stages: "
                                                                "[{name: pt, data: pt, tokens: 1000}]}]"])
    assert slurm_jobs(plain, SlurmOptions(gpus_per_node=1))[1].after_ok == ["prepare"]

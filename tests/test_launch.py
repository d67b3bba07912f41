"""preschool run --arm, prepare under a lock, and `preschool launch --slurm` job graphs (fake sbatch)."""

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from preschool.cli import main
from preschool.experiment import load_experiment_file
from preschool.launch import slurm_jobs, SlurmOptions

ROOT = Path(__file__).resolve().parents[1]
PAPER = sorted((ROOT / "examples" / "paper").glob("*.yaml"))
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

# the quickstart at micro scale: seconds per arm on CPU
MICRO = ["model.preset=micro", "tokenizer.vocab_size=300", "tokenizer.sample_documents=200",
         "data.pt.tokens=20000", "data.pt.val_tokens=2048", "data.dyck.tokens=4000", "data.dyck.val_tokens=1024",
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
    exp = load_experiment_file(ROOT / "examples/compartments_infonce.yaml", [f"out={tmp_path}"])
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
                        "data.base.val_tokens=2048", "arms.1.stages.0.tokens=2048", "tokenizer.vocab_size=300",
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
    ``<log>.scancel``; sinfo prints ``<log>.sinfo`` if written, else two 64-CPU nodes of 8 GPUs."""
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
    (bin_dir / "scancel").write_text(f'#!/bin/bash\necho "$*" > {log}.scancel\n')
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
    exp = load_experiment_file(ROOT / "examples/quickstart.yaml", [f"out={tmp_path}"])
    jobs = {j.name: j.script for j in slurm_jobs(exp, SlurmOptions(nodes=2, gpus_per_node=4))}
    assert "#SBATCH --gpus-per-node=4" in jobs["pt_only-seed0"] and "#SBATCH --nodes=2" in jobs["pt_only-seed0"]
    assert "--gpus-per-node" not in jobs["prepare"]  # data building needs no GPU
    # the runner evaluates on CPU: the report job asks no GPU unless told to
    assert "--gpus-per-node" not in jobs["report"] and "#SBATCH --nodes=1" in jobs["report"]
    jobs = {j.name: j.script for j in slurm_jobs(exp, SlurmOptions(gpus_per_node=4, report_gpus=1))}
    assert "#SBATCH --gpus-per-node=1" in jobs["report"]


def test_every_job_sets_cpus_per_task_and_srun_passes_them_on(tmp_path):
    exp = load_experiment_file(ROOT / "examples/quickstart.yaml", [f"out={tmp_path}"])
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
    try:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
        assert rank_threads() is None and torch.get_num_threads() == before  # not under torchrun: untouched
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        assert rank_threads() == 4 and torch.get_num_threads() == 4
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "16")
        assert rank_threads() == 1 and torch.get_num_threads() == 1
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
    assert "skip prepare: data prepared" in text and "would run: a-seed0, b-seed0, report" in text
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
    assert "skip prepare" in text and "skip a-seed0: finished with this config" in text and "skip b-seed0" in text
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
    # another training config for the same run folder: refused before anything is submitted
    assert _launch(cfg, "--gpus-per-node", "0", "--set", "train.lr=0.01", out=out) == 2
    assert "train.lr" in capsys.readouterr().err and len(log.read_text().splitlines()) == 1
    # another eval/report config: the report runs again, the arm does not
    assert _launch(cfg, "--gpus-per-node", "0", "--set", "report.window=0.25", "--dry-run", out=out) == 0
    text = capsys.readouterr().out
    assert "would run: report" in text and "skip a-seed0" in text and "skip b-seed0" in text

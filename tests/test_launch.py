"""preschool run --arm, prepare under a lock, and `preschool launch --slurm` job graphs (fake sbatch)."""

import os
import re
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from preschool.cli import main
from preschool.launch import load, slurm_jobs, SlurmOptions

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


def _fake_sbatch(bin_dir: Path, log: Path) -> None:
    """An sbatch that records its arguments and answers like `sbatch --parsable` (id;cluster)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "sbatch"
    exe.write_text(f"""#!/bin/bash
n=$(( $(wc -l < {log} 2>/dev/null || echo 0) + 1001 ))
echo "$n $*" >> {log}
echo "$n;testcluster"
""")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def test_launch_submits_the_job_graph_with_fake_sbatch(tmp_path, monkeypatch, capsys):
    log = tmp_path / "sbatch.log"
    _fake_sbatch(tmp_path / "bin", log)
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
                  '--rdzv-endpoint "$head:29500"', '--rdzv-id "$SLURM_JOB_ID"', "-m preschool.cli run",
                  "--arm dyck --seed 6", "--set out=run"):
        assert piece in line
    assert "scontrol show hostnames" in script
    out = capsys.readouterr().out
    assert "submitted report: job" in out


def test_compartments_init_from_arm_waits_for_its_source(tmp_path):
    exp = load(ROOT / "examples/compartments_infonce.yaml", [f"out={tmp_path}"])
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

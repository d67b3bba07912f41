"""`preschool launch` of a ladder: one job per rung x arm x seed running `--rung`, and a finished rung's jobs
are not submitted again."""

from pathlib import Path

from preschool.experiment import load_experiment, prepare_experiment, run_arm
from preschool.launch import SlurmOptions, current_jobs, slurm_jobs

ROOT = Path(__file__).resolve().parents[1]
MICRO = ROOT / "tests" / "ladder_micro.yaml"


def test_a_ladder_launches_one_job_per_rung_arm_seed_and_skips_finished_ones(tmp_path):
    exp = load_experiment(MICRO, [f"out={tmp_path}", "seeds=[0,1]", "minimal_pairs.per_paradigm=0", "evals=[]"])
    jobs = slurm_jobs(exp, SlurmOptions(gpus_per_node=0))
    arm_jobs = [j for j in jobs if j.role == "arm"]
    assert [j.name for j in arm_jobs] == [f"{r}-{a}-seed{s}" for r in ("r0", "r1", "r2") for s in (0, 1)
                                          for a in ("pt_only", "ppt")]
    r1 = next(j for j in arm_jobs if j.name == "r1-ppt-seed1")
    assert "--arm ppt --seed 1 --rung r1 " in r1.script and r1.after_ok == ["prepare"]
    assert jobs[-1].after_any == [j.name for j in arm_jobs]
    prepare_experiment(exp, progress=False)
    for arm in ("pt_only", "ppt"):  # what the r0 seed-0 jobs run
        one = load_experiment(MICRO, exp.overrides + ["rung=r0"])
        assert run_arm(one, arm, 0, progress=False) == tmp_path / "rungs" / "r0" / "arms" / arm / "seed0"
    done = current_jobs(exp, jobs)
    assert set(done) == {"prepare", "r0-pt_only-seed0", "r0-ppt-seed0"}
    # the report job after a partial ladder: the standard tables of the largest rung say unfinished, the
    # ladder section reads the rung that finished and names the others
    from preschool.analysis.report import write_report

    text = write_report(exp).read_text()
    assert "## Scale ladder" in text and "Not read yet (no finished run): r1, r2." in text

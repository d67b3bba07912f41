"""cpu_heap: freed training buffers stay in the heap (no page faults per step), and the trainer applies it on CPU.

Each check runs in a fresh interpreter: the setting is process-wide and cannot be undone.
"""

import json
import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="the setting applies to glibc only")


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


_FAULTS = """
    import json, resource, torch
    from preschool.train.cpu_heap import retain_freed_memory
    applied = retain_freed_memory() if {retain} else False
    def cycle():  # what a step does: allocate an activation-sized buffer, write it, free it
        t = torch.empty(8 << 20)
        t.fill_(1.0)
        del t
    for _ in range(20):  # glibc settles its bins within a few cycles of this pattern
        cycle()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        cycle()
    print(json.dumps({{"applied": applied, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0}}))
"""


def test_retained_heap_stops_page_faults_on_reused_buffers():
    system = _run(_FAULTS.format(retain=False))
    kept = _run(_FAULTS.format(retain=True))
    assert kept["applied"] and not system["applied"]
    # 10 x 32 MiB: glibc's default maps and zeroes every buffer afresh (thousands of faults each;
    # fewer with transparent huge pages), the retained heap reuses the same pages
    assert system["faults"] > 500
    assert kept["faults"] < 100


def test_trainer_applies_it_on_cpu_unless_system(tmp_path, datasets, micro_cfg):
    data = {k: str(v) for k, v in datasets.items()}
    code = f"""
        import json
        from preschool.train import cpu_heap
        from preschool.train.trainer import train
        cfg = {micro_cfg()!r}
        data = {data!r}
        train(dict(cfg, cpu_heap="system"), {str(tmp_path / "a")!r}, data)
        system = cpu_heap._applied
        train(cfg, {str(tmp_path / "b")!r}, data)
        print(json.dumps({{"system": system, "default": cpu_heap._applied}}))
    """
    got = _run(code)
    assert got == {"system": False, "default": True}

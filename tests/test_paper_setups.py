"""docs/paper_setups.md cannot drift from the paper configs: every table row whose field is a dotted config
path has its "ours" value checked against the resolved config.

A section ``## <name>`` (with ``examples/paper/<name>.yaml`` in its first line) holds a table
``| field | ours | paper's value | paper | source |``. A field written as `` `a.b.c` `` is a path into the
loaded experiment (:func:`resolve`), and its "ours" cell (`` `value` ``, read as YAML) must equal what the
path resolves to; a field in plain words is a note (a departure with no config field, say) and is not
checked. The "paper's value" cell (`` `value` ``, or ``–`` where the paper states none) must equal ours
unless the row says **departure**, and differ where it does: a changed paper number is caught as a changed
config value is. The ``## Defaults`` section resolves paths into the code's defaults instead (:func:`defaults`).
"""

import dataclasses
import math
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "paper_setups.md"
PAPER = ROOT / "examples" / "paper"
CELL = re.compile(r"^`([^`]*)`$")


def sections(text: str) -> dict[str, list[tuple[int, list[str]]]]:
    """``{section name: [(line number, [field, ours, paper's value, paper, source])]}`` from the markdown tables."""
    out: dict[str, list] = {}
    name = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            name = line[3:].split()[0]
            out[name] = []
        elif name and line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] != "field":  # the header row
                out[name].append((n, cells))
    return out


def plain(value):
    """Dataclasses as dicts and tuples as lists: what a YAML value compares with."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _step(obj, key: str):
    if isinstance(obj, dict):
        if key not in obj:
            raise KeyError(key)
        return obj[key]
    if isinstance(obj, (list, tuple)):
        if key.isdigit():
            return obj[int(key)]
        # an eval by its label (``key``) first: two lm_eval runs share a name, not a label
        hits = [x for x in obj if getattr(x, "key", None) == key] or [
            x for x in obj if getattr(x, "name", None) == key or (isinstance(x, dict) and x.get("name") == key)]
        if len(hits) != 1:
            raise KeyError(key)
        return hits[0]
    if not hasattr(obj, key):
        raise KeyError(key)
    return getattr(obj, key)


def resolve(exp, path: str):
    """The value at ``path`` in the loaded experiment ``exp`` (its config, or its first seed's run records; of a
    ladder, the largest rung's).

    ``train.<f>`` is the resolved TrainConfig of the first arm (shared settings merged over the
    defaults), ``arms.<arm>.train.<f>`` that arm's; list items are picked by index, ``name`` or an
    eval's label; ``evals.<label>.config.<f>`` is the evaluator's config as built from its params (the
    evaluator's defaults filled in).
    """
    from preschool.evals import EVALUATORS

    cfg = exp.cfg

    def train(arm):  # the resolved TrainConfig of the arm's run of the first seed (of a ladder, at its largest rung)
        return next(r.train for r in exp.report_view().runs if r.arm == arm.name and r.seed == cfg.seeds[0])

    keys = path.split(".")
    if keys[0] == "train":
        obj, keys = train(cfg.arms[0]), keys[1:]
    elif keys[0] == "arms" and len(keys) > 2 and keys[2] == "train":
        obj, keys = train(_step(cfg.arms, keys[1])), keys[3:]
    elif keys[0] == "evals" and len(keys) > 2 and keys[2] == "config":
        spec = _step(cfg.evals, keys[1])
        obj, keys = EVALUATORS.build_config(spec.name, spec.params), keys[3:]
    else:
        obj = cfg
    for k in keys:
        obj = _step(obj, k)
    return plain(obj)


def defaults():
    """What the ``## Defaults`` section's paths start from: synthetic presets and evaluator configs."""
    from preschool.evals import EVALUATORS
    from preschool.evals.depo import reference_hops
    from preschool.synthetic.base import GENERATOR_PRESETS

    return {"synthetic_presets": {p.name: p.cls.params for p in GENERATOR_PRESETS},
            "evaluators": {n: EVALUATORS.build_config(n, {}) for n in ("blimp", "minimal_pairs")},
            "depo_reference_hops": {f"max_hops_{k}": reference_hops(k) for k in (4, 6, 8)}}


def parse_ours(cell: str):
    m = CELL.match(cell)
    assert m, f"the 'ours' cell of a config path must be one `value`, got {cell!r}"
    value = yaml.safe_load(m.group(1))
    if isinstance(value, str):  # YAML 1.1 reads 1e-5 as a string
        try:
            return float(value)
        except ValueError:
            return value
    return value


def same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def mismatches(text: str, load) -> list[str]:
    """Every checked row whose "ours" differs from the resolved value (``load(name)`` -> root object)."""
    bad = []
    for name, rows in sections(text).items():
        root = load(name)
        for line, cells in rows:
            assert len(cells) == 5, f"{DOC.name}:{line}: expected | field | ours | paper's value | paper | source |"
            m = CELL.match(cells[0])
            if m is None:
                continue  # a note, not a config field
            path = m.group(1)
            try:
                got = resolve(root, path) if name != "Defaults" else plain(_walk(root, path))
            except (KeyError, IndexError, AttributeError):
                bad.append(f"{DOC.name}:{line}: {name}: no config path {path!r}")
                continue
            want = parse_ours(cells[1])
            if not same(want, got):
                bad.append(f"{DOC.name}:{line}: {name}: {path} is {got!r} in the config, the table says {want!r}")
            if cells[2] == "–":
                continue
            paper, departure = parse_ours(cells[2]), "**departure**" in cells[3] + cells[4]
            if same(paper, got) == departure:
                bad.append(f"{DOC.name}:{line}: {name}: {path} is {got!r} in the config and {paper!r} in the paper"
                           + (", but the row says **departure**" if departure else " with no **departure** stated"))
    return bad


def _walk(obj, path: str):
    for k in path.split("."):
        obj = _step(obj, k)
    return obj


def _load(name: str):
    from preschool.experiment import load_experiment

    if name == "Defaults":
        return defaults()
    return load_experiment(PAPER / f"{name}.yaml")


def test_every_paper_config_has_a_section_of_checked_rows():
    got = sections(DOC.read_text())
    for path in sorted(PAPER.glob("*.yaml")):
        assert path.stem in got, f"{DOC.name} has no section for {path.name}"
        checked = [c for _, c in got[path.stem] if CELL.match(c[0])]
        assert len(checked) >= 8, f"{path.stem}: only {len(checked)} rows name a config path"
        assert all(c[3] and c[4] for _, c in got[path.stem]), f"{path.stem}: a row without the paper's value or source"
    assert "Defaults" in got


def test_the_table_says_what_the_configs_hold():
    assert mismatches(DOC.read_text(), _load) == []


def test_a_drifted_value_or_a_missing_path_is_caught():
    text = ("## verify_ppt_500m (examples/paper/verify_ppt_500m.yaml)\n\n| field | ours | paper's value | paper | source |\n"
            "|---|---|---|---|---|\n| `train.lr` | `3e-4` | – | 5e-4 | VP |\n| `train.no_such_field` | `1` | – | 1 | VP |\n"
            "| `model.overrides.rms_norm_eps` | `1e-5` | `1e-5` | 1e-5 | VP |\n| block type | ours | – | theirs | VP |\n")
    bad = mismatches(text, _load)
    assert len(bad) == 2 and "train.lr is 0.0005" in bad[0] and "no config path 'train.no_such_field'" in bad[1]


def test_a_changed_paper_value_or_an_unstated_departure_is_caught():
    """The second column holds the papers' values: one edited away from the config, or a departure the row
    does not state (or states where there is none), fails (issue #31 item 8)."""
    text = ("## verify_ppt_500m (examples/paper/verify_ppt_500m.yaml)\n\n| field | ours | paper's value | paper | source |\n"
            "|---|---|---|---|---|\n| `train.lr` | `5e-4` | `3e-4` | 3e-4 | VP |\n"
            "| `train.precision` | `auto` | `bf16` | bf16 | VP; **departure**: autocast |\n"
            "| `train.eps` | `1e-8` | `1e-8` | 1e-8 | VP; **departure**: none really |\n"
            "| `seq_len` | `4096` | `4096` | 4096 | VP |\n")
    bad = mismatches(text, _load)
    assert len(bad) == 2 and "train.lr is 0.0005 in the config and 0.0003 in the paper with no" in bad[0]
    assert "train.eps" in bad[1] and "but the row says **departure**" in bad[1]


def test_resolve_reads_arm_stages_and_evaluator_defaults():
    cfg = _load("verify_ppt_500m")
    assert resolve(cfg, "arms.dyck.stages.pt.reset_optimizer") is True
    assert resolve(cfg, "evals.blimp.config.tie_tolerance") == 0.0  # the lm_eval preset's, not in the YAML
    with pytest.raises(KeyError):
        resolve(cfg, "arms.nope.stages")

import pytest

from preschool.analysis.plots import plot_metric_vs_tokens, plot_phenomenon_bars, plot_verbatim_positions
from preschool.errors import ConfigError

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(p):
    data = p.read_bytes()
    return len(data) > 1000 and data[:8] == PNG


def test_metric_vs_tokens_single_and_per_seed(tmp_path):
    curves = {
        "baseline": [(0, 3.0), (100, 2.5), (200, 2.2)],
        "ppt": [[(0, 3.1), (100, 2.4), (200, 2.0)], [(0, 2.9), (100, 2.3)], []],
    }
    p = plot_metric_vs_tokens(curves, tmp_path / "a" / "loss.png", title="val loss", ylabel="nats")
    assert _is_png(p)
    assert not list((tmp_path / "a").glob(".*tmp"))  # no temp files left behind
    assert _is_png(plot_metric_vs_tokens(curves, tmp_path / "sd.png", band="sd", logx=True))
    assert _is_png(plot_metric_vs_tokens({"empty": []}, tmp_path / "empty.png"))
    with pytest.raises(ConfigError, match="band"):
        plot_metric_vs_tokens(curves, tmp_path / "x.png", band="iqr")


def test_phenomenon_bars_and_verbatim_positions(tmp_path):
    acc = {"baseline": {"anaphor_agreement": 0.8, "island_effects": 0.55},
           "ppt": {"anaphor_agreement": [0.82, 0.86], "island_effects": [0.5, 0.6], "quantifiers": 0.7}}
    assert _is_png(plot_phenomenon_bars(acc, tmp_path / "bars.png", title="BLiMP"))
    pos = {"baseline": {"list1": [6.0, 5.5, 5.8], "list2": [5.0, 3.0, 2.5]},
           "ppt": {"list1": [6.1, 5.9, 5.7], "list2": [4.0, 2.0, 1.5]}}
    assert _is_png(plot_verbatim_positions(pos, tmp_path / "pos.png", title="n3"))

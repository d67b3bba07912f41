import numpy as np

from preschool.data.packing import Doc, PackStats
from preschool.l2t.packing import greedy_rows, pack_greedy


def _docs(lengths, start=1):
    return [Doc(np.arange(start + 100 * i, start + 100 * i + n) % 1000 + 1) for i, n in enumerate(lengths)]


def test_greedy_rows_exact():
    # longest first: 7 -> r0; 6 -> r1 (7+6 > 10); 3 -> least filled r1 (6+3=9); 2 -> r0 (7+2); 2 -> new r2
    docs = _docs([3, 7, 2, 6, 2])
    assert greedy_rows(docs, 10) == [[1, 4], [3, 0], [2]] or greedy_rows(docs, 10) == [[1, 2], [3, 0], [4]]
    assert greedy_rows(docs, 10) == [[1, 2], [3, 0], [4]]  # ties keep input order


def test_pack_greedy_invariants():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=300).tolist() + [60]
    docs = _docs(lengths)
    c = PackStats()
    blocks = list(pack_greedy(docs, 50, pad_id=0, seed=3, batch=100, counts=c))
    assert c.dropped_too_long == 1 and c.documents == 300
    seen = []
    for b in blocks:
        for t, m, s in zip(b["tokens"], b["loss_mask"], b["segments"]):
            assert (m == 1).all()  # reference: loss everywhere, padding included
            for seg in np.unique(s):
                part = t[s == seg]
                if (part == 0).all() and seg == s.max():
                    continue  # padding segment
                seen.append(tuple(part.tolist()))
            assert (np.diff(s.astype(int)) >= 0).all()
    assert sorted(seen) == sorted(tuple(d.ids.tolist()) for d in docs if len(d.ids) <= 50)
    assert c.rows == sum(len(b["tokens"]) for b in blocks)
    assert c.padded_tokens == sum(int((b["tokens"] == 0).sum()) for b in blocks)
    again = list(pack_greedy(docs, 50, pad_id=0, seed=3, batch=100))
    assert all((a["tokens"] == b["tokens"]).all() for a, b in zip(blocks, again))


def test_pack_greedy_padding_mask_off_and_answer_masks():
    docs = [Doc(np.array([5, 6, 7]), np.array([0, 1, 1], np.uint8))]
    (b,) = pack_greedy(docs, 6, pad_id=0, loss_on_padding=False)
    assert b["tokens"].tolist() == [[5, 6, 7, 0, 0, 0]]
    assert b["loss_mask"].tolist() == [[0, 1, 1, 0, 0, 0]]
    assert b["segments"].tolist() == [[0, 0, 0, 1, 1, 1]]



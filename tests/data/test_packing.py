import numpy as np

from preschool.data.packing import ConcatPacker, Doc, PackStats, pack


def test_concat_keeps_every_token_in_order_and_counts_tail():
    docs = [Doc(np.arange(n) + 10 * n) for n in range(1, 8)]
    st = PackStats()
    blocks = list(pack(docs, row_len=6, eos_id=0, stats=st))
    flat = np.concatenate([b["tokens"].ravel() for b in blocks])
    stream = np.concatenate([np.append(d.ids, 0) for d in docs])
    assert np.array_equal(flat, stream[: len(flat)])
    assert st.rows * 6 + st.dropped_tail_tokens == len(stream) == st.tokens_in
    assert st.documents == 7


def test_segments_restart_per_row_and_mask_follows_document():
    docs = [Doc(np.array([5, 6, 7]), np.array([0, 1, 1])), Doc(np.array([8, 9]), np.array([0, 0]))]
    (block,) = list(pack(docs, row_len=7, eos_id=1))
    assert block["tokens"].tolist() == [[5, 6, 7, 1, 8, 9, 1]]
    assert block["loss_mask"].tolist() == [[0, 1, 1, 1, 0, 0, 0]]  # EOS inherits its document's last mask
    assert block["segments"].tolist() == [[0, 0, 0, 0, 1, 1, 1]]


def test_pad_mode_one_document_per_row():
    docs = [Doc(np.array([3, 4])), Doc(np.arange(10))]
    st = PackStats()
    (block,) = list(pack(docs, row_len=5, eos_id=1, mode="pad", pad_id=0, stats=st))
    assert block["tokens"].tolist() == [[3, 4, 1, 0, 0], [0, 1, 2, 3, 4]]
    assert block["loss_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert st.truncated_documents == 1 and st.padded_tokens == 2


def test_stateful_packer_matches_pack():
    docs = [Doc(np.arange(n)) for n in range(1, 20)]
    ref = np.concatenate([b["tokens"] for b in pack(docs, 8, 99)])
    p = ConcatPacker(8, 99)
    got = [b["tokens"] for d in docs if (b := p.add(d)) is not None]
    tail = p.finish()
    got = np.concatenate(got + ([tail["tokens"]] if tail is not None else []))
    assert np.array_equal(ref, got)

"""The transform inside another engine: HF ``datasets.map(num_proc=2)`` gives the same samples."""

from preschool.l2t.transform import L2TTransform

DOCS = [f"Doc {i}. " + "The sailors sang as the boat left the harbour at dawn. Nobody heard them. " * (1 + i % 3)
        for i in range(12)]
CFG = {"min_num_words": 5, "chunk_tokens": 32}


def _fn(batch, idx):
    tf = L2TTransform(CFG)
    out = {"text": [], "task": []}
    for i, t, p in zip(idx, batch["text"], batch["prev_text"]):
        for s in tf(i, t, p).samples:
            out["text"].append(s.text)
            out["task"].append(s.task)
    return out


def test_datasets_map_num_proc_matches_local():
    from datasets import Dataset

    ds = Dataset.from_dict({"text": DOCS})
    ds = ds.add_column("prev_text", [None] + ds["text"][:-1])
    mapped = ds.map(_fn, batched=True, batch_size=3, with_indices=True, num_proc=2, remove_columns=ds.column_names)
    tf = L2TTransform(CFG)
    local = [s.text for i, t in enumerate(DOCS) for s in tf(i, t, DOCS[i - 1] if i else None).samples]
    assert mapped["text"] == local and len(local) > 12

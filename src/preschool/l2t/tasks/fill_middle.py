"""Fill Middle (L2T, discourse level): write the missing middle third of a passage.

Reference code (``passage_completion``): uses finer chunks (``2 * (count //
512) + 1`` blocks, about half size). The block is split on single spaces into
thirds by word count (P1 = first n//3 words, P2 = next n//3, P3 = the rest);
every third needs ``min_num_words`` words. Prompt: P1 and P3 on two lines,
unmarked half the time, otherwise with one of the reference's 24 first/third
marker pairs; completion: P2.
"""

from __future__ import annotations

from ..base import L2T_TASKS, Pair, Skip, Task, TaskConfig, pick

# The reference's 24 pairs (passage_completion.py), in its order: six bracketed,
# then ``x.``, ``x:`` (with First/Opening too), ``(x)`` and ``x)`` over 1/3, A/C, a/c, i/iii.
_SETS = (("1", "3"), ("A", "C"), ("a", "c"), ("i", "iii"))
_WORDS = (("First", "Third"), ("Opening", "Closing"))
MARKERS: tuple[tuple[str, str], ...] = (
    tuple((f"[{a}]", f"[{b}]") for a, b in _SETS + _WORDS)
    + tuple((f"{a}.", f"{b}.") for a, b in _SETS)
    + tuple((f"{a}:", f"{b}:") for a, b in _SETS + _WORDS)
    + tuple((f"({a})", f"({b})") for a, b in _SETS)
    + tuple((f"{a})", f"{b})") for a, b in _SETS)
)


@L2T_TASKS.register("fill_middle", config=TaskConfig)
class FillMiddle(Task):
    """Generate the middle of a passage from its start and end (Yamaguchi et al. 2026, Fill Middle)."""

    reference_name = "passage_completion"
    min_sentences = 3
    fine_chunks = True

    def make(self, chunk, rng, ctx):
        words = chunk.text.split(" ")
        third = len(words) // 3
        p1, p2, p3 = words[:third], words[third:2 * third], words[2 * third:]
        m = self.cfg.min_num_words
        if min(len(p1), len(p2), len(p3)) < max(m, 1):
            raise Skip("short_chunk")
        a, b, c = " ".join(p1), " ".join(p2), " ".join(p3)
        if rng.random() < 0.5:
            prompt = f"{a}\n{c}"
        else:
            first, last = pick(rng, MARKERS)
            prompt = f"{first} {a}\n{last} {c}"
        return Pair(prompt, b)

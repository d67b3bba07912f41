"""Deletion (L2T, sentence level): find (or remove) an intruder sentence.

Reference code: a random sentence of the previous document is inserted at a
uniformly random position (0..len) of the chunk's sentences. Prompt: all
sentences joined by spaces. Completion, 50/50: the clean passage, or the
intruder sentence alone (no instruction says which; ambiguous by design).
"""

from __future__ import annotations

from ..base import L2T_TASKS, Pair, Skip, Task, TaskConfig, pick


@L2T_TASKS.register("deletion", config=TaskConfig)
class Deletion(Task):
    """Remove or name an inserted foreign sentence (Yamaguchi et al. 2026, Deletion)."""

    reference_name = "sentence_deletion"
    min_sentences = 2
    needs_prev = True

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        prev = [s for s in (ctx.prev_sentences or ()) if s.strip()]
        if not prev:
            raise Skip("no_distractor")
        intruder = pick(rng, prev)
        at = int(rng.integers(len(chunk.sentences) + 1))
        mixed = chunk.sentences[:at] + [intruder] + chunk.sentences[at:]
        answer_clean = rng.random() < 0.5
        return Pair(" ".join(mixed), chunk.text if answer_clean else intruder,
                    {"position": at, "answer": "clean" if answer_clean else "intruder"})

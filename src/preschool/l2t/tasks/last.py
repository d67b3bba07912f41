"""Last (L2T, word level): choose the true final phrase of a passage out of two.

Reference code (primary variant): the chunk's last sentence is cut at its last
whitespace token whose lower-cased form is a stopword (attached punctuation
kept, so "the," does not match); the gold phrase runs from there to the end
(just the final word when there is no stopword). The question is the words
before the phrase plus a mask string, with "?" appended half the time. The
distractor is the final phrase of a random sentence of the previous document.
The context (earlier sentences) is followed by the question after a space or
after ``\\n\\nQuestion: `` (50/50). Options: both phrases in random order after a
blank line, with an ``Options:`` header half the time, unlabeled half the time
and otherwise labeled with one of the reference's 18 label pairs (brackets only
for a/b and A/B; ``x.``, ``x:``, ``(x)``, ``x)`` for 1/2, A/B, a/b, i/ii).
Completion: label + gold phrase.
"""

from __future__ import annotations

from ..base import L2T_TASKS, MASKS, Pair, Skip, Task, TaskConfig, pick

# The reference's list (last_phrase_prediction.py), in its order: square brackets
# only for a/b and A/B, then four styles over 1/2, A/B, a/b, i/ii.
_LABEL_SETS = (("1", "2"), ("A", "B"), ("a", "b"), ("i", "ii"))
LABEL_PAIRS: tuple[tuple[str, str], ...] = (("[a] ", "[b] "), ("[A] ", "[B] ")) + tuple(
    (style.format(a), style.format(b)) for style in ("{}. ", "{}: ", "({}) ", "{}) ") for a, b in _LABEL_SETS
)


def split_last_phrase(sentence: str, stopwords) -> tuple[list[str], str]:
    """(words before the phrase, final phrase) of one sentence."""
    words = sentence.split()
    if not words:
        return [], ""
    j = len(words) - 1
    for i in range(len(words) - 1, -1, -1):
        if words[i].lower() in stopwords:
            j = i
            break
    return words[:j], " ".join(words[j:])


@L2T_TASKS.register("last", config=TaskConfig)
class Last(Task):
    """Pick the passage's real last phrase vs a distractor (Yamaguchi et al. 2026, Last)."""

    reference_name = "last_phrase_prediction"
    min_sentences = 2
    needs_prev = True

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        prev = [s for s in (ctx.prev_sentences or ()) if s.split()]
        if not prev:
            raise Skip("no_distractor")
        before, gold = split_last_phrase(chunk.sentences[-1], ctx.stopwords)
        if not gold:
            raise Skip("empty_sentence")
        _, wrong = split_last_phrase(pick(rng, prev), ctx.stopwords)
        question = " ".join(before + [pick(rng, MASKS)])
        if rng.random() < 0.5:
            question += "?"
        context = " ".join(chunk.sentences[:-1])
        if rng.random() < 0.5:
            body = f"{context} {question}" if context else question
        else:
            body = f"{context}\n\nQuestion: {question}" if context else f"Question: {question}"
        options = [gold, wrong]
        gold_at = int(rng.integers(2))
        if gold_at == 1:
            options.reverse()
        header = "Options:\n" if rng.random() < 0.5 else ""
        labels = ("", "") if rng.random() < 0.5 else pick(rng, LABEL_PAIRS)
        lines = "\n".join(lab + opt for lab, opt in zip(labels, options))
        return Pair(f"{body}\n\n{header}{lines}", labels[gold_at] + gold, {"distractor": wrong})

import pytest

from preschool.corpora import is_grammatical
from preschool.corpora import lexicon as L
from preschool.corpora.grammar import split_sentences, tokenize

GOOD = [
    "The dog runs.", "The dogs run.", "Anna likes herself.", "The girls like themselves.",
    "The key to the cabinets is red.", "The keys to the cabinet are red.",
    "The dog that the girls like runs.", "The dogs that like the girl run.",
    "The dog does not run.", "The dogs do not run.", "Tom did not see the cats.", "The cake is not warm.",
    "Does the dog like the cats?", "Do the dogs sleep?", "Did Anna see herself?", "Are the apples red?",
    "Who likes the ball?", "What does the girl like?", "Who do the boys help?", "Where does the cat sleep?",
    "There is a dog near the trees.", "There were two cats.", "An old owl sleeps.", "A happy elephant laughs.",
    "One day, Tom found an egg under the bed.", "Then she hugged him.", "The teacher helped himself.",
    "The teacher helped herself.", "They saw it quickly.", "The dog hid itself.", "Every boy sings.",
    "No dogs swim.", "Those ducks swim beside the boat slowly.",
]

BAD = [
    "The dog run.", "The dogs runs.", "Anna likes himself.", "The girls like herself.", "Tom likes themselves.",
    "The key to the cabinets are red.", "The dog that the girls like run.", "The dog that the girl likes run.",
    "The dog do not run.", "The dogs does not run.", "Do the dog like the cats?", "Does the dogs sleep?",
    "Is the apples red?", "There are a dog.", "There was two cats.", "A old owl sleeps.", "An happy elephant laughs.",
    "This dogs run.", "These dog runs.", "Anna likes he.", "Him runs.", "The dog hid himself.",
    "the dog runs.", "The dog runs", "The dog runs!", "The dog runs quickly quickly.", "Dog runs.",
    "The dog likes.", "The dog sleeps the cat.", "Where does the cat like?", "The dog does not runs.",
    "The dog is not.", "The zorblax runs.",
]


@pytest.mark.parametrize("s", GOOD)
def test_accepts(s):
    assert is_grammatical(s), s


@pytest.mark.parametrize("s", BAD)
def test_rejects(s):
    assert not is_grammatical(s), s


def test_tokenize_and_split():
    assert tokenize("One day, Tom ran.") == ["one", "day", ",", "tom", "ran", "."]
    assert split_sentences("A dog ran. Did it sleep? It did not sleep.") == ["A dog ran.", "Did it sleep?", "It did not sleep."]


def test_lexicon_is_unambiguous():
    """Word classes share no spelling (except the few function words the grammar disambiguates)."""
    classes = {
        "noun": {w for n in L.NOUNS for w in (n.sg, n.pl)},
        "verb": {w for v in L.VERBS for w in (v.s3, v.base, v.past)},
        "adj": set(L.ADJECTIVES), "name": {n.lower() for n in L.NAMES}, "prep": set(L.PREPOSITIONS) | L.REL_PREPOSITIONS,
        "adv": set(L.ADVERBS), "pron": set(L.PRONOUN_NOM) | set(L.PRONOUN_ACC) | set(L.REFLEXIVES),
        "aux": set(L.BE) | set(L.DO),
    }
    names = list(classes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not classes[a] & classes[b], (a, b, classes[a] & classes[b])
    assert all(v.base != v.past and v.s3 != v.base for v in L.VERBS)  # agreement and tense always visible
    assert all(n.sg != n.pl for n in L.NOUNS)
    assert len({n.sg for n in L.NOUNS}) == len(L.NOUNS) and len({v.base for v in L.VERBS}) == len(L.VERBS)

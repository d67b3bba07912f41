"""The storybook lexicon: a few hundred hand-picked English words with their features.

Word classes do not share spellings (no "watch" as both noun and verb, no
verb whose past equals its bare form such as "hit"), so every word has one
reading and the grammar checker in ``grammar.py`` can decide a sentence
without guessing. Nouns whose plural equals the singular ("sheep") are left
out because they cannot carry number agreement.

Gender: ``m``/``f`` (he/she), ``c`` (a person of either sex: he or she),
``n`` (animals and things: it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Noun:
    sg: str
    pl: str
    gender: str  # m | f | c | n
    kind: str  # person | animal | thing
    rel: str | None = None  # preposition of a relational reading ("the key to ...")


@dataclass(frozen=True)
class Verb:
    s3: str  # present, 3rd person singular
    base: str  # present plural and bare form after do/does/did
    past: str
    kind: str  # intr (intransitive) | tr (transitive)
    obj: str = "any"  # tr: which objects make sense: any | animate | thing | food
    subj: str = "animate"  # intr: animate | any (things too: "the ball rolls") | thing ("the lamp glows")


def _n(kind: str, gender: str, spec: str, rel: dict[str, str] | None = None) -> list[Noun]:
    out = []
    for w in spec.split():
        sg, _, pl = w.partition("/")
        out.append(Noun(sg, pl or sg + "s", gender, kind, (rel or {}).get(sg)))
    return out


NOUNS: list[Noun] = [
    *_n("person", "f", "girl woman/women mother sister aunt queen princess/princesses grandmother lady/ladies witch/witches"),
    *_n("person", "m", "boy man/men father brother uncle king prince/princes grandfather wizard"),
    *_n("person", "c", "child/children teacher farmer baker doctor friend neighbor pilot sailor student "
                       "cook singer painter dancer driver", rel={"friend": "of", "teacher": "of", "neighbor": "of"}),
    *_n("animal", "n", "dog cat bird rabbit mouse/mice fox/foxes horse cow duck frog bear owl lion goose/geese "
                       "puppy/puppies bunny/bunnies turtle pig goat wolf/wolves monkey elephant squirrel hen kitten "
                       "tiger zebra donkey snail"),
    *_n("thing", "n", "key cabinet box/boxes ball tree house book cup hat apple flower door window table chair bed "
                      "cake cookie boat kite shoe sock toy drum bell lamp basket coat bag bottle stone shell "
                      "leaf/leaves star cloud garden hill road bridge wall dish/dishes bus/buses brush/brushes "
                      "bench/benches story/stories candy/candies berry/berries knife/knives picture map letter gift "
                      "gate pencil sandwich/sandwiches orange egg umbrella",
        rel={"key": "to", "door": "to", "road": "to", "gate": "to", "bridge": "to", "map": "of", "picture": "of",
             "story": "about", "letter": "for", "gift": "for", "book": "about"}),
]


def _v(kind: str, spec: str, **kw: str) -> list[Verb]:
    out = []
    for w in spec.split():
        s3, base, past = w.split("/")
        out.append(Verb(s3, base, past, kind, **kw))
    return out


VERBS: list[Verb] = [
    *_v("intr", "runs/run/ran sleeps/sleep/slept jumps/jump/jumped sings/sing/sang laughs/laugh/laughed "
                "smiles/smile/smiled waits/wait/waited dances/dance/danced swims/swim/swam cries/cry/cried "
                "plays/play/played walks/walk/walked climbs/climb/climbed shouts/shout/shouted sits/sit/sat "
                "rests/rest/rested hops/hop/hopped giggles/giggle/giggled wakes/wake/woke hums/hum/hummed "
                "whistles/whistle/whistled yawns/yawn/yawned"),
    *_v("intr", "falls/fall/fell rolls/roll/rolled moves/move/moved shakes/shake/shook spins/spin/spun "
                "sinks/sink/sank floats/float/floated wobbles/wobble/wobbled", subj="any"),
    *_v("intr", "breaks/break/broke glows/glow/glowed shines/shine/shone", subj="thing"),
    *_v("tr", "likes/like/liked sees/see/saw finds/find/found wants/want/wanted holds/hold/held "
              "carries/carry/carried takes/take/took pushes/push/pushed pulls/pull/pulled watches/watch/watched "
              "loves/love/loved gets/get/got keeps/keep/kept brings/bring/brought catches/catch/caught "
              "remembers/remember/remembered", obj="any"),
    *_v("tr", "helps/help/helped hugs/hug/hugged follows/follow/followed calls/call/called tickles/tickle/tickled "
              "washes/wash/washed teaches/teach/taught knows/know/knew meets/meet/met chases/chase/chased "
              "hears/hear/heard thanks/thank/thanked blames/blame/blamed trusts/trust/trusted protects/protect/protected "
              "feeds/feed/fed scares/scare/scared surprises/surprise/surprised admires/admire/admired "
              "dresses/dress/dressed", obj="animate"),
    *_v("tr", "opens/open/opened paints/paint/painted drops/drop/dropped buys/buy/bought throws/throw/threw "
              "polishes/polish/polished fixes/fix/fixed draws/draw/drew hides/hide/hid has/have/had", obj="thing"),
    *_v("tr", "eats/eat/ate", obj="food"),
]

FOOD = {"cake", "cookie", "apple", "sandwich", "candy", "berry", "orange", "egg"}  # what "eat" takes

# Verbs that take a reflexive object naturally ("Anna washed herself").
REFLEXIVE_VERBS = {"likes", "sees", "helps", "washes", "teaches", "knows", "hears", "blames", "trusts", "protects",
                   "admires", "dresses", "scares", "surprises", "tickles", "loves", "watches", "remembers", "finds"}

# Adjectives that suit living beings and ones that suit things; the generator picks by the noun
# (the checker accepts any adjective anywhere).
ADJ_ANIMATE: list[str] = (
    "big small little happy sad tired hungry old young brave kind quiet loud tall short funny sleepy busy gentle "
    "clever proud lucky angry shy silly lazy fast slow wet dry").split()
ADJ_THING: list[str] = "big small little red blue green yellow soft warm cold clean dirty shiny wet dry new round " \
    "empty heavy old pretty".split()
ADJECTIVES: list[str] = sorted(set(ADJ_ANIMATE) | set(ADJ_THING))

NAMES: dict[str, str] = {
    **{n: "f" for n in "Anna Mia Lily Emma Sara Rose Lucy Ella Nora Zoe Grace Ruby Alice Maya Hannah Clara Julia Eva "
                       "Ivy Molly".split()},
    **{n: "m" for n in "Tom Ben Sam Max Leo Jack Noah Finn Oscar Theo Hugo Luke Adam Peter Oliver Henry Owen Paul "
                       "Jake Felix".split()},
}

PREPOSITIONS: list[str] = "near behind under beside with above".split()  # locative modifiers and adjuncts
REL_PREPOSITIONS = {"to", "of", "about", "for"}  # only after a relational noun
ADVERBS: list[str] = "quickly slowly happily quietly again today".split()
OPENERS: list[tuple[str, ...]] = [("then",), ("later",), ("one", "day", ","), ("after", "that", ","),
                                  ("suddenly", ","), ("the", "next", "day", ",")]

# Determiners by the noun number they need; "the" and "no" take both, "a"/"an" by the next word's sound.
DET_SG = ["a", "this", "that", "every", "one"]
DET_PL = ["these", "those", "some", "many", "two", "three"]
DET_ANY = ["the", "no"]

PRONOUN_NOM = {"he": ("sg", "m"), "she": ("sg", "f"), "it": ("sg", "n"), "they": ("pl", "*")}
PRONOUN_ACC = {"him": ("sg", "m"), "her": ("sg", "f"), "it": ("sg", "n"), "them": ("pl", "*")}
REFLEXIVES = {"himself": ("sg", "m"), "herself": ("sg", "f"), "itself": ("sg", "n"), "themselves": ("pl", "*")}

BE = {"is": ("sg", "pres"), "are": ("pl", "pres"), "was": ("sg", "past"), "were": ("pl", "past")}
DO = {"does": ("sg", "pres"), "do": ("pl", "pres"), "did": ("*", "past")}
FUNCTION_WORDS = ["that", "not", "there", "who", "what", "where", "an"]


def article_for(word: str) -> str:
    """'an' before a vowel letter, else 'a' (true for every word in this lexicon)."""
    return "an" if word[0] in "aeiou" else "a"


def vocabulary() -> set[str]:
    """Every lower-cased word the storybook can produce (punctuation excluded)."""
    words = set()
    for n in NOUNS:
        words |= {n.sg, n.pl}
    for v in VERBS:
        words |= {v.s3, v.base, v.past}
    words |= set(ADJECTIVES) | {n.lower() for n in NAMES} | set(PREPOSITIONS) | REL_PREPOSITIONS | set(ADVERBS)
    words |= {w for o in OPENERS for w in o if w != ","}
    words |= set(DET_SG) | set(DET_PL) | set(DET_ANY) | set(PRONOUN_NOM) | set(PRONOUN_ACC) | set(REFLEXIVES)
    words |= set(BE) | set(DO) | set(FUNCTION_WORDS)
    return words

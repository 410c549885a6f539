"""The course's own parallel corpus: English -> a German-like language, from a synchronous grammar.

Nothing is downloaded. `make_corpus(n, seed)` derives every sentence pair from the seed, so the same call
always returns the same pairs. The grammar is small but not word-for-word: the target side has

- gendered articles and case: der/die/das, den (accusative), dem/der (dative), ein/eine/einen/einem/einer;
- adjective endings that depend on the article, gender, number and case (der alte Mann, ein alter Mann,
  den alten Mann, alte Hunde);
- plural agreement of the verb (der Hund schläft, die Hunde schlafen) even where English shows none
  (the dog slept / the dogs slept -> schlief / schliefen);
- verb-second after a fronted adverb or a fronted subordinate clause (yesterday the man saw the dog ->
  gestern sah der Mann den Hund);
- the participle at the end of the clause (the man has given the woman the book -> der Mann hat der Frau das
  Buch gegeben), with haben or sein;
- the finite verb at the end of a subordinate clause (..., weil die Frau das Buch liest / gelesen hat);
- dative objects (the man helps the woman -> der Mann hilft der Frau), "to" dropped in favour of the dative
  (gives the book to the woman -> gibt der Frau das Buch), and "in the" contracted to "im".

Each source sentence has exactly one translation, and each pair carries its gold word alignment: for each target
word, the index of the source word it translates, or None (the German comma before a subordinate clause).

Sizes (corpus_stats): make_corpus(40000, seed=0) has 180 English and 285 German words, sentences of 4-20 words
(mean 11) and 78 % of pairs whose alignment is not monotonic; with max_words=14 the mean is 9 words and 71 %.

The module also reads and writes tab-separated pair files and has a word-level `Vocab` (see its docstring for
why words rather than subwords). It holds data and plumbing only, no model code.
"""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..speech import _

__all__ = [
    "Pair", "make_corpus", "split_pairs", "read_pairs", "write_pairs", "corpus_stats", "is_reordered",
    "tokenize", "Vocab", "PAD", "BOS", "EOS", "UNK", "SPECIALS", "english_word_classes", "similar_known_words",
]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3 in every Vocab


@dataclass(frozen=True)
class Pair:
    """One sentence pair. `src`/`tgt` are space-separated words; `alignment[j]` is the index of the source word
    that target word j translates, or None (no source word; e.g. the comma German puts before "weil")."""

    src: str
    tgt: str
    alignment: tuple[int | None, ...] | None = None
    tags: frozenset[str] = field(default=frozenset(), compare=False)  # grammar phenomena used (generated pairs)


# ----------------------------------------------------------------------------------------------------------------
# Lexicon. Nouns: English singular, plural; German singular, plural; gender; semantic classes.
# The German dative plural adds -n unless the plural already ends in -n or -s.

_NOUNS = [
    # people
    ("man", "men", "Mann", "Männer", "m", "person"),
    ("woman", "women", "Frau", "Frauen", "f", "person"),
    ("child", "children", "Kind", "Kinder", "n", "person"),
    ("girl", "girls", "Mädchen", "Mädchen", "n", "person"),
    ("teacher", "teachers", "Lehrer", "Lehrer", "m", "person"),
    ("doctor", "doctors", "Arzt", "Ärzte", "m", "person"),
    ("friend", "friends", "Freund", "Freunde", "m", "person"),
    ("mother", "mothers", "Mutter", "Mütter", "f", "person"),
    ("father", "fathers", "Vater", "Väter", "m", "person"),
    ("sister", "sisters", "Schwester", "Schwestern", "f", "person"),
    ("brother", "brothers", "Bruder", "Brüder", "m", "person"),
    # animals
    ("dog", "dogs", "Hund", "Hunde", "m", "animal"),
    ("cat", "cats", "Katze", "Katzen", "f", "animal"),
    ("bird", "birds", "Vogel", "Vögel", "m", "animal"),
    # things (r = something to read or write, o = can be opened, c = can be carried, f = food)
    ("book", "books", "Buch", "Bücher", "n", "thing r o c"),
    ("letter", "letters", "Brief", "Briefe", "m", "thing r o c"),
    ("bag", "bags", "Tasche", "Taschen", "f", "thing o c"),
    ("box", "boxes", "Kiste", "Kisten", "f", "thing o c"),
    ("bottle", "bottles", "Flasche", "Flaschen", "f", "thing o c"),
    ("door", "doors", "Tür", "Türen", "f", "thing o"),
    ("window", "windows", "Fenster", "Fenster", "n", "thing o"),
    ("ball", "balls", "Ball", "Bälle", "m", "thing c"),
    ("flower", "flowers", "Blume", "Blumen", "f", "thing c"),
    ("apple", "apples", "Apfel", "Äpfel", "m", "thing c f"),
    ("cake", "cakes", "Kuchen", "Kuchen", "m", "thing c f"),
    # places (after "in")
    ("house", "houses", "Haus", "Häuser", "n", "place"),
    ("garden", "gardens", "Garten", "Gärten", "m", "place"),
    ("city", "cities", "Stadt", "Städte", "f", "place"),
    ("forest", "forests", "Wald", "Wälder", "m", "place"),
    ("car", "cars", "Auto", "Autos", "n", "place thing"),
]

_ADJECTIVES = [  # English, German stem (regular endings), the nouns it may describe
    ("old", "alt", "animate thing place"), ("young", "jung", "animate"), ("big", "groß", "animate thing place"),
    ("small", "klein", "animate thing place"), ("new", "neu", "thing place"), ("red", "rot", "thing"),
    ("green", "grün", "thing place"), ("black", "schwarz", "animal thing"), ("cold", "kalt", "thing place"),
    ("happy", "glücklich", "animate"), ("tired", "müde", "animate"), ("good", "gut", "animate thing"),
    ("beautiful", "schön", "animate thing place"), ("clever", "klug", "person"),
]

# Verbs: English (base, 3sg, past, participle); German (3sg, 3pl, past sg, past pl, participle); auxiliary;
# frame (intr | acc | dat | dat_acc | that); subject class; object class (acc or dat object).
_VERBS = [
    (("sleep", "sleeps", "slept", "slept"), ("schläft", "schlafen", "schlief", "schliefen", "geschlafen"),
     "haben", "intr", "animate", None),
    (("laugh", "laughs", "laughed", "laughed"), ("lacht", "lachen", "lachte", "lachten", "gelacht"),
     "haben", "intr", "person", None),
    (("sing", "sings", "sang", "sung"), ("singt", "singen", "sang", "sangen", "gesungen"),
     "haben", "intr", "animate", None),
    (("work", "works", "worked", "worked"), ("arbeitet", "arbeiten", "arbeitete", "arbeiteten", "gearbeitet"),
     "haben", "intr", "person", None),
    (("play", "plays", "played", "played"), ("spielt", "spielen", "spielte", "spielten", "gespielt"),
     "haben", "intr", "animate", None),
    (("run", "runs", "ran", "run"), ("läuft", "laufen", "lief", "liefen", "gelaufen"),
     "sein", "intr", "animate", None),
    (("come", "comes", "came", "come"), ("kommt", "kommen", "kam", "kamen", "gekommen"),
     "sein", "intr", "animate", None),
    (("see", "sees", "saw", "seen"), ("sieht", "sehen", "sah", "sahen", "gesehen"),
     "haben", "acc", "animate", "any"),
    (("find", "finds", "found", "found"), ("findet", "finden", "fand", "fanden", "gefunden"),
     "haben", "acc", "animate", "animate c"),
    (("like", "likes", "liked", "liked"), ("mag", "mögen", "mochte", "mochten", "gemocht"),
     "haben", "acc", "person", "any"),
    (("buy", "buys", "bought", "bought"), ("kauft", "kaufen", "kaufte", "kauften", "gekauft"),
     "haben", "acc", "person", "thing animal"),
    (("write", "writes", "wrote", "written"), ("schreibt", "schreiben", "schrieb", "schrieben", "geschrieben"),
     "haben", "acc", "person", "r"),
    (("eat", "eats", "ate", "eaten"), ("isst", "essen", "aß", "aßen", "gegessen"),
     "haben", "acc", "animate", "f"),
    (("carry", "carries", "carried", "carried"), ("trägt", "tragen", "trug", "trugen", "getragen"),
     "haben", "acc", "person", "c"),
    (("open", "opens", "opened", "opened"), ("öffnet", "öffnen", "öffnete", "öffneten", "geöffnet"),
     "haben", "acc", "person", "o"),
    (("help", "helps", "helped", "helped"), ("hilft", "helfen", "half", "halfen", "geholfen"),
     "haben", "dat", "person", "animate"),
    (("thank", "thanks", "thanked", "thanked"), ("dankt", "danken", "dankte", "dankten", "gedankt"),
     "haben", "dat", "person", "person"),
    (("follow", "follows", "followed", "followed"), ("folgt", "folgen", "folgte", "folgten", "gefolgt"),
     "sein", "dat", "animate", "animate"),
    (("give", "gives", "gave", "given"), ("gibt", "geben", "gab", "gaben", "gegeben"),
     "haben", "dat_acc", "person", "c"),
    (("show", "shows", "showed", "shown"), ("zeigt", "zeigen", "zeigte", "zeigten", "gezeigt"),
     "haben", "dat_acc", "person", "thing"),
    (("send", "sends", "sent", "sent"), ("schickt", "schicken", "schickte", "schickten", "geschickt"),
     "haben", "dat_acc", "person", "c"),
    (("bring", "brings", "brought", "brought"), ("bringt", "bringen", "brachte", "brachten", "gebracht"),
     "haben", "dat_acc", "person", "c"),
    (("say", "says", "said", "said"), ("sagt", "sagen", "sagte", "sagten", "gesagt"),
     "haben", "that", "person", None),
    (("know", "knows", "knew", "known"), ("weiß", "wissen", "wusste", "wussten", "gewusst"),
     "haben", "that", "person", None),
]

_AUX = {"haben": ("hat", "haben"), "sein": ("ist", "sind")}  # German 3sg, 3pl; English is has / have for both

_ADVERBS = {  # fronted time adverbs, by the tense they go with
    "present": [("today", "heute"), ("now", "jetzt"), ("often", "oft"), ("sometimes", "manchmal")],
    "past": [("yesterday", "gestern"), ("later", "später"), ("suddenly", "plötzlich"), ("then", "dann")],
}
_ADVERBS["perfect"] = _ADVERBS["past"]

_CONJUNCTIONS = [("because", "weil"), ("although", "obwohl"), ("while", "während")]  # + ("if", "wenn"): present

# Prepositional phrases: English, German, case, class of the noun.
_PREPOSITIONS = [
    ("with", "mit", "dat", "animate c"),
    ("from", "von", "dat", "person"),
    ("without", "ohne", "acc", "animate c"),
    ("for", "für", "acc", "person animal"),
    ("in", "in", "dat", "place"),
]

# German determiners by (kind, case, gender or "pl"); adjective endings by the same key.
_DEF = {"nom": dict(m="der", f="die", n="das", pl="die"), "acc": dict(m="den", f="die", n="das", pl="die"),
        "dat": dict(m="dem", f="der", n="dem", pl="den")}
_INDEF = {"nom": dict(m="ein", f="eine", n="ein"), "acc": dict(m="einen", f="eine", n="ein"),
          "dat": dict(m="einem", f="einer", n="einem")}
_MY = {c: {g: "m" + w for g, w in d.items()} for c, d in _INDEF.items()}
_MY["nom"]["pl"], _MY["acc"]["pl"], _MY["dat"]["pl"] = "meine", "meine", "meinen"
_WEAK = {"nom": dict(m="e", f="e", n="e", pl="en"), "acc": dict(m="en", f="e", n="e", pl="en"),
         "dat": dict(m="en", f="en", n="en", pl="en")}  # after der, and after mein- in the plural
_MIXED = {"nom": dict(m="er", f="e", n="es"), "acc": dict(m="en", f="e", n="es"),
          "dat": dict(m="en", f="en", n="en")}  # after ein/mein in the singular
_STRONG_PL = {"nom": "e", "acc": "e", "dat": "en"}  # no article, plural

_VOWELS = "aeiou"


def _classes(spec: str) -> set[str]:
    out = set(spec.split())
    if "animate" in out:
        out |= {"person", "animal"}
    return out


def _noun_classes(noun) -> set[str]:
    cls = set(noun[5].split())
    if cls & {"person", "animal"}:
        cls.add("animate")
    return cls


def _dat_plural(de_pl: str) -> str:
    return de_pl if de_pl.endswith(("n", "s")) else de_pl + "n"


def _adjective(stem: str, ending: str) -> str:
    # müde, leise: the stem already ends in -e, so "e" + "e" -> "e", "e" + "en" -> "en" (müden), ...
    return stem + (ending[1:] if stem.endswith("e") else ending)


_NOUN_POOLS: dict[str, list] = {}
_VERBS_BY_FRAME = {f: [v for v in _VERBS if v[3] == f] for f in ("intr", "acc", "dat", "dat_acc", "that")}
_ADJ_POOLS = {noun[0]: [a for a in _ADJECTIVES if _classes(a[2]) & _noun_classes(noun)] for noun in _NOUNS}


class _Sentence:
    """Parallel token lists under construction: English tokens get ids; German tokens point at one id or None."""

    def __init__(self) -> None:
        self._next = 0

    def en(self, word: str) -> tuple[str, int]:
        self._next += 1
        return (word, self._next)


class _Grammar:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.s = _Sentence()
        self.tags: set[str] = set()

    # -- noun phrases ------------------------------------------------------------------------------------------
    def noun(self, classes: str):
        pool = _NOUN_POOLS.get(classes)
        if pool is None:
            want = _classes(classes) if classes != "any" else None
            pool = _NOUN_POOLS[classes] = [n for n in _NOUNS if want is None or _noun_classes(n) & want]
        return self.rng.choice(pool)

    def np(self, case: str, classes: str):
        """English tokens, German tokens, number ('sg'/'pl'). German tokens are (word, english-id or None)."""
        rng, s = self.rng, self.s
        noun = self.noun(classes)
        en_sg, en_pl, de_sg, de_pl, gender, _ = noun
        number = "pl" if rng.random() < 0.35 else "sg"
        kinds = ["the", "the", "the", "a", "a", "my"] if number == "sg" else ["the", "the", "the", "my", "bare", "bare"]
        kind = rng.choice(kinds)
        adj = rng.choice(_ADJ_POOLS[en_sg]) if rng.random() < 0.3 else None
        g = gender if number == "sg" else "pl"
        en_noun = s.en(en_sg if number == "sg" else en_pl)
        if number == "pl":
            de_noun_word = _dat_plural(de_pl) if case == "dat" else de_pl
            self.tags.add("plural")
        else:
            de_noun_word = de_sg
        en, de = [], []
        if kind == "bare":
            det_en, det_de = None, None
            ending = _STRONG_PL[case]
        elif kind == "the":
            det_en = s.en("the")
            det_de = _DEF[case][g]
            ending = _WEAK[case][g]
        elif kind == "a":
            first = (adj[0] if adj else en_noun[0])[0]
            det_en = s.en("an" if first in _VOWELS else "a")
            det_de = _INDEF[case][g]
            ending = _MIXED[case][g]
        else:  # my
            det_en = s.en("my")
            det_de = _MY[case][g]
            ending = _MIXED[case][g] if number == "sg" else _WEAK[case][g]
        if det_en is not None:
            en.append(det_en)
            de.append((det_de, det_en[1]))
        if adj is not None:
            en_adj = s.en(adj[0])
            en.append(en_adj)
            de.append((_adjective(adj[1], ending), en_adj[1]))
            self.tags.add("adjective")
        en.append(en_noun)
        de.append((de_noun_word, en_noun[1]))
        self.tags.add(f"case_{case}")
        return en, de, number

    def pp(self):
        rng, s = self.rng, self.s
        en_p, de_p, case, classes = rng.choice(_PREPOSITIONS)
        prep = s.en(en_p)
        en, de, _ = self.np(case, classes)
        # "in the house" -> "im Haus": German contracts in + dem; the "the" has no German word of its own.
        if en_p == "in" and de[0][0] == "dem" and en[0][0] == "the":
            self.tags.add("contraction")
            return [prep] + en, [("im", prep[1])] + de[1:]
        return [prep] + en, [(de_p, prep[1])] + de

    # -- clauses -----------------------------------------------------------------------------------------------
    def clause(self, kind: str, tense: str, depth: int = 0, fronted: str | None = None):
        """kind: 'main' (verb second) or 'sub' (verb last). fronted: an English/German token pair list put
        in first position of a main clause (adverb), which sends the subject after the verb."""
        rng, s = self.rng, self.s
        frames = ["intr", "acc", "acc", "dat", "dat_acc"] + (["that"] if depth == 0 and kind == "main" else [])
        frame = rng.choice(frames)
        verb = rng.choice(_VERBS_BY_FRAME[frame])
        (en_base, en_3sg, en_past, en_part), (de_3sg, de_3pl, de_psg, de_ppl, de_part), aux, _, subj_cls, obj_cls = verb
        subj_en, subj_de, number = self.np("nom", subj_cls)
        # English verb group
        if tense == "present":
            v_en = [s.en(en_3sg if number == "sg" else en_base)]
            fin_de = (de_3sg if number == "sg" else de_3pl, v_en[0][1])
            part_de = None
        elif tense == "past":
            v_en = [s.en(en_past)]
            fin_de = (de_psg if number == "sg" else de_ppl, v_en[0][1])
            part_de = None
        else:  # perfect
            v_en = [s.en("has" if number == "sg" else "have"), s.en(en_part)]
            fin_de = (_AUX[aux][0 if number == "sg" else 1], v_en[0][1])
            part_de = (de_part, v_en[1][1])
            self.tags.add("perfect_sein" if aux == "sein" else "perfect")
        if number == "pl":
            self.tags.add("plural_verb")
        # objects
        obj_en, mid_de = [], []  # mid_de: German words between the finite verb (main) and the participle
        complement = None
        if frame == "acc":
            o_en, o_de, _ = self.np("acc", obj_cls)
            obj_en, mid_de = o_en, o_de
        elif frame == "dat":
            o_en, o_de, _ = self.np("dat", obj_cls)
            obj_en, mid_de = o_en, o_de
            self.tags.add("dative_object")
        elif frame == "dat_acc":
            io_en, io_de, _ = self.np("dat", "person")
            do_en, do_de, _ = self.np("acc", obj_cls)
            if rng.random() < 0.4:  # gives the book to the woman -> gibt der Frau das Buch
                to = s.en("to")
                obj_en = do_en + [to] + io_en
                self.tags.add("to_dative")
            else:
                obj_en = io_en + do_en
            mid_de = io_de + do_de
            self.tags.add("ditransitive")
        elif frame == "that":
            that = s.en("that")
            sub_tense = rng.choice(["present", "past", "perfect"])
            c_en, c_de = self.clause("sub", sub_tense, depth + 1)
            complement = ([that] + c_en, [(",", None), ("dass", that[1])] + c_de)
            self.tags.add("that_clause")
        # optional prepositional phrase at the end (not with clause complements)
        pp_en, pp_de = [], []
        if frame != "that" and rng.random() < 0.3:
            pp_en, pp_de = self.pp()
            self.tags.add("prepositional")
        en = subj_en + v_en + obj_en + pp_en
        rest = mid_de + pp_de
        if kind == "main":
            if fronted is not None:
                f_en, f_de = fronted
                en = f_en + en
                de = f_de + [fin_de] + subj_de + rest
                self.tags.add("verb_second")
            else:
                de = subj_de + [fin_de] + rest
            if part_de is not None:
                de = de + [part_de]
        else:
            de = subj_de + rest + ([part_de] if part_de is not None else []) + [fin_de]
            self.tags.add("verb_final")
        if complement is not None:
            en = en + complement[0]
            de = de + complement[1]
        return en, de

    def sentence(self):
        rng, s = self.rng, self.s
        tense = rng.choice(["present", "past", "perfect"])
        r = rng.random()
        if r < 0.30:  # fronted adverb: verb second
            a_en, a_de = rng.choice(_ADVERBS[tense])
            adv = s.en(a_en)
            en, de = self.clause("main", tense, fronted=([adv], [(a_de, adv[1])]))
            self.tags.add("fronted_adverb")
        elif r < 0.55:  # main clause, subordinate clause
            c_en, c_de, sub_tense = self._conjunction(tense)
            conj = s.en(c_en)
            en, de = self.clause("main", tense, depth=1)
            se, sd = self.clause("sub", sub_tense, depth=1)
            en = en + [conj] + se
            de = de + [(",", None), (c_de, conj[1])] + sd
            self.tags.add("subordinate")
        elif r < 0.65:  # subordinate clause first: it takes the first position, the main verb follows it
            c_en, c_de, sub_tense = self._conjunction(tense)
            conj = s.en(c_en)
            se, sd = self.clause("sub", sub_tense, depth=1)
            comma = s.en(",")
            front = ([conj] + se + [comma], [(c_de, conj[1])] + sd + [(",", comma[1])])
            en, de = self.clause("main", tense, depth=1, fronted=front)
            self.tags.add("subordinate")
            self.tags.add("fronted_subordinate")
        else:
            en, de = self.clause("main", tense)
        stop = s.en(".")
        return en + [stop], de + [(".", stop[1])]

    def _conjunction(self, tense: str):
        if tense == "present" and self.rng.random() < 0.25:
            return "if", "wenn", "present"
        c_en, c_de = self.rng.choice(_CONJUNCTIONS)
        return c_en, c_de, self.rng.choice(["present", "past", "perfect"])


def _generate(rng: random.Random) -> Pair:
    g = _Grammar(rng)
    en, de = g.sentence()
    position = {tid: i for i, (_, tid) in enumerate(en)}
    alignment = tuple(None if tid is None else position[tid] for _, tid in de)
    return Pair(" ".join(w for w, _ in en), " ".join(w for w, _ in de), alignment, frozenset(g.tags))


_MAX_MISSES = 20000  # draws in a row without a new sentence before make_corpus gives up


#: The corpus notebook 08 and `attn train` use: `make_corpus(**COURSE_CORPUS)`.
COURSE_CORPUS = {"n": 40_000, "seed": 0, "max_words": 12}


def make_corpus(n: int, seed: int = 0, max_words: int = 20, min_words: int = 4) -> list[Pair]:
    """`n` sentence pairs with distinct source sentences, each side `min_words`..`max_words` tokens long
    (punctuation counts as a token). The same arguments always give the same list (a new list each call; the pairs
    are immutable, and the last few corpora are kept, so asking again is instant)."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if max_words < 4 or min_words > max_words:
        raise ValueError(f"need 4 <= max_words and min_words <= max_words, "
                         f"got min_words={min_words}, max_words={max_words}")
    return list(_generate_corpus(int(n), int(seed), int(max_words), int(min_words)))


@functools.lru_cache(maxsize=4)
def _generate_corpus(n: int, seed: int, max_words: int, min_words: int) -> tuple[Pair, ...]:
    rng = random.Random(seed)
    seen: set[str] = set()
    pairs: list[Pair] = []
    misses = 0  # draws in a row that gave nothing new
    while len(pairs) < n:
        pair = _generate(rng)
        ls, lt = pair.src.count(" ") + 1, pair.tgt.count(" ") + 1
        if not (min_words <= ls <= max_words and min_words <= lt <= max_words) or pair.src in seen:
            misses += 1
            if misses > _MAX_MISSES:
                raise RuntimeError(f"could not find {n} distinct sentences of {min_words}..{max_words} words "
                                   f"(found {len(pairs)}); allow longer sentences or ask for fewer")
            continue
        misses = 0
        seen.add(pair.src)
        pairs.append(pair)
    return tuple(pairs)


def warm() -> None:
    """Generate the course's corpus now (about 1.5 s), for a process whose children will ask for it: the grading
    engine's zygote does this before notebook 08's workers start (utils.course: `Notebook.warm`)."""
    make_corpus(**COURSE_CORPUS)


def split_pairs(pairs: Sequence[Pair], seed: int = 0, held_out: float | int = 0.1) -> tuple[list[Pair], list[Pair]]:
    """Shuffle (seeded) and split into (train, held_out). A source sentence that occurs more than once is kept
    once (its first occurrence), so no held-out source sentence is ever seen in training. `held_out` is a
    fraction (0 < f < 1) or a number of pairs."""
    unique: dict[str, Pair] = {}
    for p in pairs:
        unique.setdefault(p.src, p)
    items = list(unique.values())
    random.Random(seed).shuffle(items)
    k = round(held_out * len(items)) if isinstance(held_out, float) else int(held_out)
    if not 0 <= k <= len(items):
        raise ValueError(f"held_out={held_out} asks for {k} of {len(items)} distinct pairs")
    return items[k:], items[:k]


# ----------------------------------------------------------------------------------------------------------------
# Tab-separated files: source <TAB> target [<TAB> alignment], alignment as space-separated indices, "-" for None.

def write_pairs(path: str | Path, pairs: Iterable[Pair]) -> None:
    """Write one pair a line, UTF-8, tab-separated; the alignment (when known) is a third column."""
    lines = []
    for p in pairs:
        for text in (p.src, p.tgt):
            if "\t" in text or "\n" in text:
                raise ValueError(f"a sentence contains a tab or a newline and cannot be written: {text!r}")
        cols = [p.src, p.tgt]
        if p.alignment is not None:
            cols.append(" ".join("-" if a is None else str(a) for a in p.alignment))
        lines.append("\t".join(cols))
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def read_pairs(path: str | Path) -> list[Pair]:
    """Read a file written by `write_pairs`, or any UTF-8 file of `source<TAB>target` lines (blank lines are
    skipped). Sentences are re-tokenized with `tokenize`, so "Hello, world!" becomes "hello , world !"."""
    pairs = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) not in (2, 3) or not cols[0].strip() or not cols[1].strip():
            raise ValueError(_("{path}, line {number}: expected 'source<TAB>target' (optionally <TAB>alignment), got "
                               "{n} tab-separated field(s): {line}").format(path=path, number=number, n=len(cols),
                                                                             line=repr(line[:80])))
        src, tgt = " ".join(tokenize(cols[0])), " ".join(tokenize(cols[1]))
        alignment = None
        if len(cols) == 3:
            n_src, n_tgt = len(src.split()), len(tgt.split())
            try:
                alignment = tuple(None if a == "-" else int(a) for a in cols[2].split())
            except ValueError:
                alignment = ()
            if len(alignment) != n_tgt or any(a is not None and not 0 <= a < n_src for a in alignment):
                raise ValueError(_("{path}, line {number}: the alignment must give one source index (0..{last}) or "
                                   "'-' for each of the {n} target words, got {got}").format(
                                       path=path, number=number, last=n_src - 1, n=n_tgt, got=repr(cols[2])))
        pairs.append(Pair(src, tgt, alignment))
    return pairs


# ----------------------------------------------------------------------------------------------------------------
# Tokens and vocabulary

_TOKEN = re.compile(r"<[a-z]+>|[\w'-]+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Words and single punctuation marks, case kept (German nouns are capitalised): 'Hi, you!' -> ['Hi', ',',
    'you', '!']. The generated corpus is already in this form, so tokenize(p.src) == p.src.split()."""
    return _TOKEN.findall(text)


class Vocab:
    """Word-level vocabulary: ids 0..3 are <pad> <bos> <eos> <unk>, then words by falling frequency (ties in
    alphabetical order, so the same sentences always give the same ids).

    Why words and not subwords (BPE): the grammar's vocabulary is closed and small (a few hundred words), so with
    tens of thousands of training pairs every word occurs many times and nothing is out of vocabulary; one token
    per word keeps sequences short (fast CPU training) and makes cross-attention maps line up with the gold word
    alignment. The <unk> policy: a word seen fewer than `min_freq` times in the training sentences maps to <unk>
    (min_freq=1: every training word is kept); `unk_rate` measures what share of another set's words would be
    <unk>. With your own small TSV file, check unk_rate on the held-out part before training: a min_freq of 2 on
    five sentence pairs turns nearly everything into <unk>.
    """

    def __init__(self, words: Sequence[str]) -> None:
        words = list(words)
        if tuple(words[:4]) != SPECIALS or len(set(words)) != len(words):
            raise ValueError("a Vocab's word list must start with <pad> <bos> <eos> <unk> and have no duplicates")
        self.itos: list[str] = words
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(words)}

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    @classmethod
    def build(cls, sentences: Iterable[str], min_freq: int = 1) -> Vocab:
        if min_freq < 1:
            raise ValueError(f"min_freq must be at least 1, got {min_freq}")
        counts: Counter[str] = Counter()
        for s in sentences:
            counts.update(tokenize(s))
        for special in SPECIALS:
            counts.pop(special, None)
        kept = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        return cls(list(SPECIALS) + kept)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: str) -> bool:
        return word in self.stoi

    def encode(self, sentence: str, add_bos_eos: bool = True) -> list[int]:
        ids = [self.stoi.get(w, self.unk_id) for w in tokenize(sentence)]
        return [self.bos_id] + ids + [self.eos_id] if add_bos_eos else ids

    def decode(self, ids: Iterable[int], strip: bool = True) -> str:
        """Words for ids, joined by spaces; with strip, stop at <eos> and drop <pad> and <bos>."""
        words = []
        for i in ids:
            i = int(i)
            if strip and i == self.eos_id:
                break
            if strip and i in (self.pad_id, self.bos_id):
                continue
            words.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return " ".join(words)

    def unk_rate(self, sentences: Iterable[str]) -> float:
        """Share of the words in `sentences` that this vocabulary maps to <unk>."""
        total = unknown = 0
        for s in sentences:
            for w in tokenize(s):
                total += 1
                unknown += w not in self.stoi
        return unknown / total if total else 0.0

    def to_list(self) -> list[str]:
        return list(self.itos)


def english_word_classes() -> dict[str, str]:
    """Every English word the grammar can write, with its class: "noun", "verb", "adjective", "adverb" or
    "other" (articles, pronouns, prepositions, conjunctions, auxiliaries, punctuation). `attn translate` uses it
    to suggest known words in place of one the model has never seen."""
    classes: dict[str, str] = {}
    for noun in _NOUNS:
        classes.update(dict.fromkeys(noun[:2], "noun"))
    for verb in _VERBS:
        classes.update(dict.fromkeys(verb[0], "verb"))
    classes.update({a[0]: "adjective" for a in _ADJECTIVES})
    classes.update({en: "adverb" for pool in _ADVERBS.values() for en, _ in pool})
    others = ["the", "a", "an", "my", "has", "have", "that", "if", "to", ",", "."]
    others += [en for en, _ in _CONJUNCTIONS] + [pp[0] for pp in _PREPOSITIONS]
    for word in others:
        classes.setdefault(word, "other")
    return classes


def similar_known_words(word: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` words of `known` to try instead of `word`: close spellings first ("womn" -> "woman"), then words
    of the class its ending suggests (-ed: past verbs; -s: verbs and plural nouns; -ly: adverbs; otherwise nouns and
    verbs; punctuation: punctuation), the most alike first."""
    import difflib

    known = [w for w in known if w not in SPECIALS]
    picks = difflib.get_close_matches(word.lower(), known, n=n, cutoff=0.8)
    classes = english_word_classes()
    w = word.lower()

    def of(kind: str, ending: str = "") -> list[str]:
        return [k for k in known if classes.get(k) == kind and k.endswith(ending)]

    def mix(a: list[str], b: list[str]) -> list[str]:
        return [x for pair in zip(a, b) for x in pair] + a[len(b):] + b[len(a):]

    if not any(ch.isalnum() for ch in w):
        wanted = [k for k in known if not any(ch.isalnum() for ch in k)]
    elif w.endswith("ly"):
        wanted = of("adverb")
    elif w.endswith("ed"):
        wanted = of("verb", "ed")
    elif w.endswith("s") and not w.endswith("ss"):
        wanted = mix(of("verb", "s"), of("noun", "s"))
    else:
        singular, base = {n[0] for n in _NOUNS}, {v[0][0] for v in _VERBS}
        wanted = mix([k for k in of("noun") if k in singular], [k for k in of("verb") if k in base])
    wanted.sort(key=lambda k: -difflib.SequenceMatcher(None, w, k).ratio())  # stable: frequent first among ties
    for k in wanted:
        if len(picks) >= n:
            break
        if k not in picks:
            picks.append(k)
    return picks


# ----------------------------------------------------------------------------------------------------------------
# Statistics

def is_reordered(alignment: Sequence[int | None]) -> bool:
    """True when the aligned source positions, read in target order, ever go backwards (a monotonic word-by-word
    translation would not need attention to look back)."""
    last = -1
    for a in alignment:
        if a is None:
            continue
        if a < last:
            return True
        last = a
    return False


def corpus_stats(pairs: Sequence[Pair]) -> dict:
    """Sizes a reader wants before training: pairs, vocabulary sizes, sentence lengths, share of pairs whose
    alignment is non-monotonic (needs reordering) and how often each grammar phenomenon occurs."""
    src_len = [len(p.src.split()) for p in pairs]
    tgt_len = [len(p.tgt.split()) for p in pairs]
    aligned = [p for p in pairs if p.alignment is not None]
    tags = Counter(t for p in pairs for t in p.tags)

    def lengths(ls: list[int]) -> dict:
        if not ls:
            return {"min": 0, "mean": 0.0, "max": 0, "histogram": {}}
        return {"min": min(ls), "mean": round(sum(ls) / len(ls), 2), "max": max(ls),
                "histogram": dict(sorted(Counter(ls).items()))}

    return {
        "pairs": len(pairs),
        "distinct_sources": len({p.src for p in pairs}),
        "src_vocab": len({w for p in pairs for w in p.src.split()}),
        "tgt_vocab": len({w for p in pairs for w in p.tgt.split()}),
        "src_len": lengths(src_len),
        "tgt_len": lengths(tgt_len),
        "reordered_share": (round(sum(is_reordered(p.alignment) for p in aligned) / len(aligned), 4)
                            if aligned else None),
        "phenomena": {t: round(c / len(pairs), 4) for t, c in sorted(tags.items())},
    }

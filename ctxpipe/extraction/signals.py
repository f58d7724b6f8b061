"""What a message can hold, read from its text alone: the signals the extractors' gates look
for before they pay for an LLM call (`ctxpipe.extraction.gates`).

Every signal leans towards "may hold something": a gate skips an extractor only when no
message shows any of that extractor's signals, so a signal that fires too often costs a call,
one that misses would lose a memory. The mechanism is the text's grammar and a few closed word
classes (pronouns, numerals, calendar words, the function words of English), not phrasings:

- **first person**: a first-person pronoun or its contraction (I, me, my, we, our, I'm …);
- **subjectless opening**: a sentence that opens (after "please", "just", "don't" …) with a word
  that can be a verb and is not a third-person "-s" form — the speaker's own statement or
  request with its subject left out ("Moved to Lisbon in May", "Keep answers short");
- **verbless fragment**: a statement without a verb ("Metric units, not
  imperial!"): its meaning leans on what came before, so it may be a correction or an answer;
- **names**: a capitalised word inside a sentence (not "I"), an acronym, or a capitalised word
  opening one that English does not know in lower case (lemminflect's lexicon);
- **times and numbers**: a digit, a numeral, a calendar word (today, weekend, ago, spring …);
- **readable**: English the gates can judge — ASCII letters and, from four words on, at least
  one word in four an English function word or chat filler; a message in another language is
  never judged (it always counts as holding something).

A sentence with no content word at all (only function words and chat filler: "ok thanks!",
"Sounds good.") holds nothing whatever its opening.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lemminflect import getAllLemmas

from ctxpipe.core.text import STOPWORDS, split_sentences

# greetings, thanks, agreement and praise: chat filler that states nothing on its own
FILLER = frozenset(
    """yo thx ty cool great nice good fine morning evening night afternoon bye goodbye cheers
    lol haha hah hmm ah alright got sounds looks seems makes sense see awesome perfect
    wonderful fantastic amazing excellent brilliant welcome np appreciate appreciated
    understood noted glad cheers""".split()
)
_NEUTRAL = STOPWORDS | FILLER
_WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_FIRST_PERSON_RE = re.compile(
    r"(?<![\w'’])(?:i|i['’](?:m|ve|ll|d)|im|ive|me|my|mine|myself|we|we['’](?:re|ve|ll|d)|"
    r"us|our|ours|ourselves)(?![\w'’])",
    re.I,
)
_SECOND_PERSON_RE = re.compile(
    r"(?<![\w'’])(?:you|you['’](?:re|ve|ll|d)|your|yours|yourself|u|ur)(?![\w'’])", re.I
)
# words that may open a request or a statement before its verb ("please keep", "never use")
_LEAD_INS = frozenset(
    "please pls just also always never dont don't do not only still really then so and but".split()
)
_NUMERALS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty
    ninety hundred thousand million billion dozen couple half once twice first second third
    fourth fifth""".split()
)
_CALENDAR = frozenset(
    """today tonight tomorrow yesterday weekend weekday morning afternoon evening night noon
    midnight ago week weeks month months year years day days hour hours minute minutes
    decade century season spring summer autumn fall winter christmas easter holiday holidays
    birthday anniversary deadline recently lately soon later earlier previously upcoming
    annual annually daily weekly monthly yearly o'clock am pm""".split()
)


def words(text: str) -> list[str]:
    return _WORD_RE.findall(text)


def _lower(word: str) -> str:
    return word.lower().replace("’", "'")


@lru_cache(maxsize=65536)
def _pos(word: str) -> frozenset[str]:
    """The parts of speech English knows `word` (lower case) by; empty for an unknown word."""
    return frozenset(getAllLemmas(word))


def readable(text: str) -> bool:
    """English the gates can judge (ASCII letters; from four words on, a fair share of English
    function words); text without words (digits, emoji, punctuation) is readable."""
    found = words(text)
    if not found:
        return True
    if not all(w.isascii() for w in found):
        return False
    if len(found) < 4:  # too short to tell: a few foreign words read as a verbless fragment
        return True
    known = sum(1 for w in found if _lower(w) in _NEUTRAL)
    return known * 4 >= len(found)


def has_content(sentence: str) -> bool:
    """A word that is neither a function word nor chat filler, or a digit."""
    return any(c.isdigit() for c in sentence) or any(
        _lower(w) not in _NEUTRAL for w in words(sentence)
    )


def first_person(text: str) -> bool:
    return _FIRST_PERSON_RE.search(text) is not None


def second_person(text: str) -> bool:
    return _SECOND_PERSON_RE.search(text) is not None


def subjectless(sentence: str) -> bool:
    """Opens (after lead-ins) with a word that can be a verb, not in its third-person "-s"
    form: "Using Python 3 at work", "Keep it short", "Don't use emojis", "Went hiking"."""
    for w in words(sentence)[:4]:
        low = _lower(w)
        if low in _LEAD_INS:
            continue
        if low in _NEUTRAL:
            return False
        pos = _pos(low)
        if "VERB" not in pos and "AUX" not in pos:
            return False
        lemmas = getAllLemmas(low).get("VERB", ())
        return not (low.endswith("s") and low not in lemmas and low[:-1] in lemmas)
    return False


def verbless(sentence: str) -> bool:
    """A statement with content words and no verb (an auxiliary, or a word that can only be a
    verb): a fragment whose
    meaning leans on what came before ("Metric units, not imperial!", "Nurse, ten years")."""
    if sentence.rstrip().endswith("?") or not has_content(sentence):
        return False
    return not any(_verb_only(_lower(w)) for w in words(sentence))


def _verb_only(word: str) -> bool:
    """An auxiliary, or a word English knows only as a verb (not "answers", "shifts")."""
    pos = _pos(word)
    return "AUX" in pos or ("VERB" in pos and not pos & {"NOUN", "ADJ"})


def names(text: str) -> bool:
    """A capitalised word inside a sentence (not "I"), an acronym, or a sentence opening with
    a capitalised word English does not know in lower case."""
    for sentence in split_sentences(text):
        for i, w in enumerate(words(sentence)):
            if not w[:1].isupper() or _lower(w) in {"i", "i'm", "i've", "i'll", "i'd"}:
                continue
            if i > 0 or (len(w) > 1 and w.isupper()):
                return True
            low = _lower(w)
            if low not in _NEUTRAL and not _pos(low):
                return True
    return False


def times_or_numbers(text: str) -> bool:
    if any(c.isdigit() for c in text):
        return True
    return any(_lower(w) in _NUMERALS or _lower(w) in _CALENDAR for w in words(text))


def sentences(text: str) -> list[str]:
    """The sentences of `text` that hold a content word."""
    return [s for s in split_sentences(text) if has_content(s)]

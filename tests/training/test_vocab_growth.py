"""Domain words joining a vocabulary (``training/vocab_growth.py``): damaged words are passed over, counted."""
from spacy_elmo.training.vocab import Vocab
from spacy_elmo.training.vocab_growth import PassedOver, domain_words, shown, unfit_reason

JUNK = {
    "\ufffd\ufffd": "replaced",  # bytes that were not UTF-8, replaced when read
    "\ufeffword": "format",  # a byte order mark
    "\u200dword": "format",  # a zero-width joiner at the start
    "word\u202e": "format",  # a right-to-left override
    "soft\u00adhyphen": "format",
    "bell\x07": "control",
    "half\ud800": "surrogate",
}
# the text's own: emoji (with joiners and a flag's tags), accented and decomposed forms, a Persian non-joiner
KEPT = ["\U0001F600", "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F",
        "caf\u00e9", "cafe\u0301", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "na\u00efve"]


def test_damaged_words_have_a_reason_and_the_texts_own_words_none():
    assert {word: unfit_reason(word) for word in JUNK} == JUNK
    assert [unfit_reason(word) for word in KEPT] == [None] * len(KEPT)
    assert shown("\ufeffword") == "\\ufeffword" and shown("caf\u00e9") == "caf\u00e9"
    # a joiner inside a word spells it only in a script that joins: between Latin letters it is damage
    assert [unfit_reason(w) for w in ("zero\u200dwidth", "caf\u00e9\u200cbar", "top\u200d10")] == ["format"] * 3


def test_domain_words_pass_over_damaged_words_and_count_them_by_reason():
    vocab = Vocab(["the", "sees"])
    segments = [["the", word, "sees", "okapi"] for word in [*JUNK, *KEPT] for _ in range(3)]
    segments.append(["\u200dword"])  # a fourth time
    passed = PassedOver()
    words = domain_words(segments, vocab, limit=100, min_count=3, passed_over=passed)
    added = [word for word, _ in words]
    assert sorted(added) == sorted(["okapi", *KEPT]) and dict(words)["okapi"] == 3 * (len(JUNK) + len(KEPT))
    assert passed.total == len(JUNK) and passed.words == {"replaced": 1, "format": 4, "control": 1, "surrogate": 1}
    assert passed.occurrences["format"] == 13 and passed.frequent["format"] == 4
    assert passed.examples["format"][0] == ("\\u200dword", 4)  # the most frequent first, escaped
    line = passed.summary(3)
    assert line.startswith("vocabulary: 7 words outside it passed over, not added (22 occurrences; 7 seen 3+ times)")
    assert "1 with U+FFFD (bytes that were not UTF-8, replaced when read), e.g. '\\ufffd\\ufffd' x3" in line
    assert passed.to_dict()["replaced"] == {"words": 1, "occurrences": 3, "frequent": 1, "examples": ["\\ufffd\\ufffd"]}
    # none passed over: nothing to say
    clean = PassedOver()
    domain_words([["okapi"]] * 3, vocab, limit=5, min_count=3, passed_over=clean)
    assert clean.total == 0 and clean.summary(3) == ""

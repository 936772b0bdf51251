"""Text plumbing of the heuristic extractor: sentences, clauses, fillers, object cleaning.

Pure functions over strings. Object cleaning is where precision is won: a captured group
runs to the end of its clause, and cleaning cuts it at the first punctuation, clause word
("because", "and I") or preposition (for entities), trims fillers ("now", "too"),
determiners and dangling function words, then applies hygiene.
"""

from __future__ import annotations

import re

from memory_core.extraction.lexicon import NAME_STOP, SPEECH_WORDS, TITLE_BODY, LazyRegex, lex
from memory_core.model.hygiene import check_subject

MAX_TEXT_CHARS = 32_000
MAX_SENTENCE_CHARS = 400
MAX_REMEMBER_CHARS = 300

_CONTROL = LazyRegex(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_INLINE_CODE = LazyRegex(r"`[^`\n]{0,200}`")
# No alternative starts with \s*: that is quadratic on a long run of blanks.
_SENT_SPLIT = LazyRegex(r"(?<=[.!?…])[\"'”’)\]]*\s+|[\r\n]\s*")
_ABBREV_END = LazyRegex(r"\b(?:Dr|Mr|Mrs|Ms|St|Mt|Jr|Sr|Prof|vs|e\.g|i\.e|approx)\.$", re.I)
_FILLER = LazyRegex(
    r"^(?:(?:oh|ah|aw|well|so|also|and|but|anyway|anyways|btw|by\s+the\s+way|actually|yeah|"
    r"yes|yep|yup|no|nope|ok|okay|haha+|lol|hey|hi|hello|um+|uh+|hmm+|honestly|fun\s+fact|"
    r"guess\s+what|wow|omg|sure|right|great|cool|nice|true|ha|heh|ugh|alright|thanks|"
    r"thank\s+you|plus|then|now|speaking\s+of\s+which|as\s+for\s+me|same\s+here|"
    r"for\s+me)\b[\s,!.:;-]*){1,4}",
    re.IGNORECASE,
)
# "My girlfriend, Toby and I went hiking": one list of three people, not a clause "My
# girlfriend, Toby" and another "I went hiking" (the relation rules then read no name:
# ``rules.my_rel_name``). The "and" is marked so that no split sees a space after it.
_LIST_WITH_SPEAKER = LazyRegex(r"(\bmy\s+[\w'’-]+,\s*(?-i:[A-Z])[\w'’-]*\s+and)(?=\s+(?:I|we)\b)",
                               re.IGNORECASE)
_NO_SPLIT = "\u2060"  # a word joiner: no space, removed again from every clause
_CLAUSE_SPLIT = LazyRegex(
    r",?\s*\bbut\b\s*|;\s*|(?<=\s)[—–-]\s+"
    r"|,\s*(?:and|so|then|because|cause|plus)\s+(?=(?:I|we|my|he|she|they)\b)"
    # "... and my son Adam is 6": a second relative's own statement (a verb within 3 words)
    r"|(?:,\s*|\s+and\s+)(?=my\s+(?:[\w'’-]+\s+){1,3}(?:is|was|lives|works|has|just|turned|"
    r"loves|likes|moved|joined|got|started)\b)"
    r"|\s+(?:and|so|because|plus)\s+(?=(?:I|we|he|she|they)\s+(?!(?:are|have\s+been|were|broke|split|separated|"
    r"got\s+(?:married|engaged)|called\s+it)\b))"
    r"|,\s*(?=(?:not|no\s+more|no\s+longer)\s)|,?\s+so\s+(?=(?:nothing|no|not|none|never)\b)"
    r"|(?<=[a-z]):\s+"
    r"|,\s*(?:and|or)\s+(?=(?:maybe|perhaps|possibly|probably)\b)"
    r"|,\s*(?=(?:what|how)\s+about\b)|,\s*(?=(?:do|did|are|have|what|how|and)\s+you\b)"
    r"|,\s+(?=(?:I|I['’]m|I['’]ve|we|it|it['’]s|they|he|she|you|nobody|everyone|no\s+one|"
    r"that|this)\b)",
    re.IGNORECASE,
)
_HARD_CUT = LazyRegex(
    r"[,;()\[\]{}\"“”!?…/|]|:(?!\w)|\s[-–—]\s|(?<=\w)[-–—]\s"  # "CS:GO" is one word
    r"|(?<!(?-i:St|Dr|Mr|Ms|Mt|Jr|Sr))(?<!(?-i:Mrs))\.(?=\s|$)"  # "Dr." (not "films.")
    r"|\s(?:lol|haha+|lmao|tbh|btw|imo|xd)\b",
    re.IGNORECASE,
)


def _set(text: str) -> frozenset[str]:
    return frozenset(lex(text))


ENTITY_STOP = _set(
    "at|in|on|for|with|from|to|near|by|since|because|but|so|which|who|whom|where|when|while|"
    "though|although|until|till|after|before|as|now|instead|right|currently|again|too|also|"
    "anymore|yet|already|still|full-time|part-time|ago|this|that|these|there|here|if|than|"
    "then|every|"
    "each|about|during|over|like|is|was|are|were|has|have|had|will|would|can|do|does|did|"
    "it's|whose|cause|cuz|coz|lol|haha|tbh|btw|together|twice|once|recently|lately|nearby|"
    "originally|though|downtown|uptown|nearby|locally|abroad|overseas|remotely|myself|"
    "personally"
)
PHRASE_STOP = _set(
    "because|since|but|which|while|though|although|unless|cause|cuz|coz|whenever|when|once|"
    "until|till|lol|haha|tbh|btw|whereas"
)
_CLAUSE_STARTERS = _set(
    "i|i'm|i've|i'll|we|we're|my|it|it's|he|she|they|then|also|you|that|there|this|am|have"
)
_TRAILING = _set(
    "now|currently|right now|these days|nowadays|instead|at the moment|at the minute|too|"
    "also|as well|again|anymore|any more|any longer|already|so much|a lot|very much|really|"
    "though|tho|either|"
    "actually|honestly|lately|recently|yet|still|anyway|then|for sure|ok|twice|once|"
    "a few times|many times|every day|everyday|every week|sometimes|often|always|regularly|"
    "together|soon|today|tonight|full time|part time|full-time|part-time|so|and stuff|"
    "and all|or something|or so|etc|lol|haha|originally|on weekends|on the weekend|"
    "on the weekends|at night|in the morning|in the evening|every morning|every weekend|"
    "at home|so much|a ton|more and more|more than anything|in my free time|in my spare time|"
    "for fun|whenever i can|when i can|myself|personally|online|nonstop|non-stop|all the time"
)
# How long ago or how often, left at the end of an object by a vague span the date rules do
# not resolve ("Denver a few months [ago]", "hiking a few times a week"). Lowercase only: a
# capitalised "Seven Years" is a name.
_QUANTITY = (r"(?:a\s+few|a\s+couple(?:\s+of)?|couple\s+of|several|many|some|a\s+number\s+of|"
             r"\d+|one|two|three|four|five|six|seven|eight|nine|ten|twelve)")
_PER = r"(?:\s+(?:a|per|each|every)\s+(?:day|week|month|year))"
_TIME_TAIL = LazyRegex(
    rf"\s+(?:{_QUANTITY}\s+(?:days?|weeks?|months?|years?|times?){_PER}?|(?:once|twice){_PER})"
    r"(?:\s+ago)?$"
)
_DANGLING = _set(
    "to|of|the|a|an|my|and|or|with|for|at|in|on|your|our|from|by|is|was|are|about|like|so|very"
)
ENTITY_BAD_START = _set(
    "to|for|with|from|up|out|off|on|in|at|into|about|over|back|away|home|here|there|it|that|"
    "this|them|him|her|you|me|us|myself|yourself|ourselves|themselves|nothing|something|"
    "everything|anything|someone|everyone|night|nights|weekends|remotely|remote|hard|late|"
    "early|all|some|any|more|most|lots|much|not|no|how|what|why|when|where|who|which|whatever"
)
# Words a clause starts with ("how it shows ..."; "the way the frosting turned out"; the rest
# of a relative clause: "the things I love [makes writing fun]"), never a list of things.
_CLAUSE_START = _set(
    "how|what|when|where|why|who|which|whatever|whoever|that|that's|it|it's|this|these|those|"
    "there|there's|here|you|your|they|they're|he|she|if|is|are|was|were|am|way|makes|gives|"
    "keeps|helps|means|brings|gets|feels|seems|lets|has|does")
# A liking holding one of these is a clause, not a thing: "talking about what we're thankful
# for"; with a verb, its "and" joins what the clause says ("making sure veterans are supported
# and valued"), not two things.
_PREF_CLAUSE_VERBS = _set("is|are|was|were|been")
_PREF_CLAUSE_WORDS = _PREF_CLAUSE_VERBS | _set("what|how|why|where|who|whom")
# ... and, besides those, the words no phrase of a thing starts with.
PHRASE_BAD_START = _CLAUSE_START | _set(
    "that'll|that’s|that’ll|it'll|it’ll|they’re|there’s|yours|him|her|them|everything|"
    "anything|something|nothing|everyone|someone|anyone|all|so|such|both|either|neither|one|"
    "ones|me|us|myself|like"
)
PHRASE_BAD_END = _set(
    "it|that|this|them|him|her|you|one|there|these|those|so|ones|me|us|stuff|things|"
    "something|anything|everything|lot|much|more|well|too"
)
_COGNITIVE = _set(
    "think|believe|say|know|imagine|admit|assume|hear|see|help|be|point out|mention|keep"
)
_VAGUE_SINGLE = _set(
    "go|come|leave|work|sleep|rest|relax|try|see|wait|stay|start|help|be|do|get|have|make|"
    "call|check|talk|think|know|finish|continue|begin|win|lose|play|eat|read|write"
)
# A liking of these says nothing without what it is of or whom it means: a bare gerund that
# wants an object ("I just like playing for fun"), an aspect of what was just shown ("I love
# the color and texture", "I really like the idea and the acting"), and a pronoun for
# someone or something named before ("I love their work", "I love having them around"; a
# pet's "his" or "her" is its own: "Max loves playing with his treats").
_PREF_VAGUE_SINGLE = _set(
    "playing|doing|going|pushing|trying|having|being|making|getting|seeing|using|taking|"
    "giving|putting|keeping|watching|working|coming|explore|idea|ideas|color|colors|colour|"
    "colours|texture|textures|smell|taste|energy|vibe|vibes|feel|feeling|feelings|look|sound|"
    "atmosphere|concept|theme|plot|plots|detail|details|message|mindset|mind|mood|spirit|"
    "setting|shape|way|"
    # which of two ("to see which one I like better"), and what the assistant just wrote ("I
    # like the template", "the checklist", "the recipe"; LongMemEval)
    "better|best|most|more|less|template|checklist|recipe|caption|draft|outline|summary|"
    "version|layout|format|list|schedule|routine|itinerary|breakdown|table|answer|response"
)
_PREF_PRONOUNS = _set("it|they|them|their|theirs|him|hers")  # not "his", "her": a pet's own
# Approval of what was just proposed, not a taste: "I like the idea of a content calendar",
# "I love the sound of the Chicken Fajitas recipe", "the pasta-making kit idea", "the third
# option", "the options you provided" (LongMemEval: 137 of the 327 likings its users said).
_CLOCK = LazyRegex(r"\d{1,2}:\d{2}$")
_PREF_REACTION_HEAD = _set("idea|sound|thought|concept")
_PREF_REACTION_END = _set("idea|ideas|suggestion|suggestions|option|options|proposal|plan|"
                          "template|checklist|caption|draft|outline|schedule|itinerary")
_SECOND_PERSON = _set("you|your|yours|yourself|yourselves|you're|you've|you'll|you'd|you’re|"
                      "you’ve")
# Prepositions after which "and" joins what the preposition governs ("road trips with
# friends and family", "books about personal development and mindset"), not two likings.
_PREPOSITIONS = _set("about|with|of|for|from|on|in|to|at|by|between|among")
# "action and sci-fi movies": kinds of one thing, the head said once ("action movies").
_GENRES = _set(
    "action|adventure|animated|anime|comedy|crime|documentary|drama|fantasy|horror|indie|"
    "mystery|romance|romantic|sci-fi|scifi|superhero|thriller|war|western|historical|"
    "classical|jazz|rock|pop|folk|punk|metal|hip-hop|rap|electronic|reggae|blues|soul|"
    "country|strategy|puzzle|racing|sports|retro")
_MEDIA = _set(
    "movies|films|shows|series|books|novels|stories|comics|music|songs|bands|games|podcasts")
_COMPOUNDS = _set(
    "mac and cheese|rock and roll|rock 'n' roll|fish and chips|salt and pepper|"
    "drum and bass|peanut butter and jelly|dungeons and dragons|arts and crafts|"
    "hide and seek|truth or dare|pros and cons|rhythm and blues|bread and butter|"
    "law and order|pride and prejudice|war and peace|black and white|sweet and sour"
)
_PROPER_AFTER_IN = LazyRegex(
    r"^\s*(?:an?|the|my|our)\s+(?:[a-z][\w-]*\s+){1,4}?(?:in|near|outside(?:\s+of)?|just\s+outside)\s+"
    r"(?=(?:the\s+)?[A-Z])"
)
_AND_SPLIT = LazyRegex(r"\s*,\s*(?:and\s+)?|\s+(?:and|&)\s+", re.IGNORECASE)
# "horror, comedy and romance films", "Paris, London, and Rome": a list whose commas do not end
# the object (a comma does otherwise: "pizza, but ...").
# A quoted title's stand-in (``_title_mark``) is an item too: '"Iron Man", "Thor", and "Hulk"'.
_LIST_ITEM = r"(?:\ue000\d+\ue001|[^\W\d_][\w'’-]*(?:\s+[^\W\d_][\w'’-]*){0,2})"
# An item after a comma that starts so adds to the one before ("Indian food, especially the
# rich ..."): no list.
_NOT_ITEM = (r"(?!(?:especially|particularly|mainly|mostly|like|including|such|sometimes|even|"
             r"also)\b)")
_COMMA_LIST = LazyRegex(rf"\s*{_LIST_ITEM}(?:\s*,\s*{_NOT_ITEM}{_LIST_ITEM}){{1,5}}\s*,?\s+"
                        rf"(?:and|or|&)\s+{_NOT_ITEM}", re.IGNORECASE)


# A quoted title ("The Office", “Spider-Man: No Way Home”) is one thing, its punctuation and
# "and" its own (and no clause ends inside it, nor does its "No" negate one): it starts with a
# capital or a digit and is at most 80 characters; with "I", "my", "we" ... in it, or ending
# in a comma or a stop inside the quotes (“Rain, rain, go away,” she sang), it is speech.
_QUOTED_TITLE = LazyRegex(rf"[\"“](?![^\"“”\n]{{0,80}}?{SPEECH_WORDS})({TITLE_BODY})[\"”]")
_TITLE_OPEN, _TITLE_CLOSE = "\ue000", "\ue001"


def _has_quote(text: str) -> bool:
    """Whether ``text`` may hold a quoted title (the cheap check before the regex)."""
    return '"' in text or "“" in text


def strip_fillers(text: str) -> str:
    """Drop leading discourse fillers ("Oh, well, so ...")."""
    return _FILLER.re.sub("", text.strip(), count=1).strip()


def _drop_code(text: str) -> str:
    fenced = text.split("```")
    prose = "\n".join(fenced[0::2])  # odd parts were inside ``` fences
    return _INLINE_CODE.re.sub(" [code] ", _CONTROL.re.sub(" ", prose))


def sentences(text: str) -> list[str]:
    """The prose sentences of a turn: bounded, code-free, fillers stripped."""
    pieces = _SENT_SPLIT.re.split(_drop_code(text[:MAX_TEXT_CHARS]))
    merged: list[str] = []
    for piece in pieces:
        if merged and _ABBREV_END.re.search(merged[-1]):
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    out: list[str] = []
    for sentence in merged:
        sentence = sentence.strip()
        parts = [sentence] if len(sentence) <= MAX_SENTENCE_CHARS else sentence.split(", ")
        for part in parts:
            part = strip_fillers(part)
            if part and len(part) <= MAX_SENTENCE_CHARS:
                out.append(part)
    return out


def clauses(sentence: str) -> list[str]:
    """Independent clauses, so a question or hypothetical in one does not hide another."""
    marked = _LIST_WITH_SPEAKER.re.sub(rf"\1{_NO_SPLIT}", sentence)
    # Never inside a quoted title ("Spider-Man: No Way Home").
    quoted = [m.span() for m in _QUOTED_TITLE.re.finditer(marked)] if _has_quote(marked) else []
    pieces, start = [], 0
    for cut in _CLAUSE_SPLIT.re.finditer(marked):
        if not any(a < cut.start() < b for a, b in quoted):
            pieces.append(marked[start:cut.start()])
            start = cut.end()
    pieces.append(marked[start:])
    parts = (strip_fillers(p.replace(_NO_SPLIT, "")) for p in pieces)
    return [p for p in parts if p]


def _cut_words(words: list[str], entity: bool, split_and: bool) -> list[str]:
    stop = ENTITY_STOP if entity else PHRASE_STOP
    out: list[str] = []
    for i, word in enumerate(words):
        low = word.lower().strip("'’")
        nxt = words[i + 1] if i + 1 < len(words) else ""
        starts_clause = nxt.lower() in _CLAUSE_STARTERS
        if low in stop:
            break
        if low in ("and", "or", "&", "+"):
            proper_next = nxt[:1].isupper() and not starts_clause
            if (entity and not proper_next) or (not entity and starts_clause):
                break
        # "so" joins a clause ("dance and fashion so combining them lets me ..."), unless it
        # says how much ("so much", trimmed as a tail).
        if not entity and ((low == "so" and nxt.lower() not in ("much", "many"))
                           or (low in ("after", "before") and starts_clause)):
            break
        out.append(word)
    return out


def _trim(words: list[str], entity: bool, articles: bool, tails: bool = False) -> list[str]:
    """Trailing fillers and dangling words off ``words``; with ``tails`` also how long ago or
    how often (``_TIME_TAIL``): noise in a place or a liking, the content of a plan ("go to
    Denver for 4 days", "train 2 times a week")."""
    changed = True
    while words and changed:
        changed = False
        for n in (4, 3, 2, 1):
            tail = " ".join(words[-n:]).lower().strip(".'’\"")
            if len(words) >= n and tail in _TRAILING:
                words, changed = words[:-n], True
                break
        if words and words[-1].lower().strip(".") in _DANGLING:
            words, changed = words[:-1], True
        span = _TIME_TAIL.re.search(" ".join(words)) if tails else None
        if span:
            words, changed = span.string[: span.start()].split(), True
    if articles and words and words[0].lower() in ("a", "an"):
        words = words[1:]
    if articles and len(words) > 1 and words[0].lower() == "the" and words[1][:1].islower():
        words = words[1:]
    return words


def _finish(part: str, policy: str, max_words: int, reject: frozenset[str]) -> str | None:
    words = part.strip(" .'’\"").split()
    low = [w.lower() for w in words]
    if policy == "pref" and "like" in low[1:]:
        cut = low.index("like", 1)  # "classical like Bach": what it is like aside
        words, low = words[:cut], low[:cut]
    if not words or len(words) > max_words:
        return None
    text = " ".join(words)
    if " ".join(low) in reject:
        return None
    if policy in ("entity", "proper"):
        head = words[1] if low[0] == "the" and len(words) > 1 else words[0]
        if low[0] in ENTITY_BAD_START or (policy == "proper" and not head[:1].isupper()):
            return None
        return text if check_subject(text) is None else None
    if low[0] in PHRASE_BAD_START or low[-1] in PHRASE_BAD_END:
        return None
    if len(low) == 1 and low[0] in _VAGUE_SINGLE:
        return None
    if policy == "pref" and ((len(low) == 1 and low[0] in _PREF_VAGUE_SINGLE)
                             or not _PREF_PRONOUNS.isdisjoint(low)
                             or not _PREF_CLAUSE_WORDS.isdisjoint(low)
                             or not _SECOND_PERSON.isdisjoint(low)
                             or (low[0] in _PREF_REACTION_HEAD and low[1:2] == ["of"])
                             or (low[0] == "number" and low[1:2] != [] and low[1].isdigit())
                             or any(_CLOCK.re.match(w) for w in low)  # "the 7:30 am Tuesday"
                             or low[-1] in _PREF_REACTION_END):
        return None
    if policy == "pref" and low[0] == "to":
        if len(low) < 2 or " ".join(low[1:3]) in _COGNITIVE or low[1] in _COGNITIVE:
            return None
        text = " ".join(words[1:])
    return text


def clean_object(
    raw: str,
    policy: str,
    max_words: int,
    split_and: bool,
    reject: frozenset[str],
    strip_possessive: bool = False,
) -> tuple[str, ...] | None:
    """The cleaned object(s) of a captured group, or None when nothing clean remains."""
    if policy == "date":
        text = " ".join(raw.split()).strip(" .,!?;:")
        return (text,) if text else None
    titles: list[str] = []
    titled = _QUOTED_TITLE.re.sub(lambda m: _title_mark(titles, m.group(1)), raw) \
        if _has_quote(raw) else raw
    if titles:
        found = _clean_cut(titled, policy, max_words, split_and, reject, strip_possessive,
                           titles)
        if found is not None:
            return found
    return _clean_cut(raw, policy, max_words, split_and, reject, strip_possessive, [])


def _clean_cut(raw: str, policy: str, max_words: int, split_and: bool, reject: frozenset[str],
               strip_possessive: bool, titles: list[str]) -> tuple[str, ...] | None:
    """``clean_object`` of ``raw``: with ``titles``, its quoted titles are stand-ins; without,
    a title ends the object as any quote does (what ``clean_object`` falls back to when the
    object with its titles is no clean thing, e.g. too long: "drive my 2018 Ford Mustang GT
    [to the "Speed Demons" event at ...]")."""
    entity = policy in ("entity", "proper")
    listed = _COMMA_LIST.re.match(raw) if split_and else None
    cut = _HARD_CUT.re.search(raw, listed.end() if listed else 0)
    raw = raw[: cut.start()] if cut else raw
    if policy == "proper":
        # "a small town in Maine": the place is the proper name after "in"
        lead = _PROPER_AFTER_IN.re.match(raw)
        raw = raw[lead.end() :] if lead else raw
    plain = policy != "phrase"  # a thing named: no article, no "how long ago" or "how often"
    words = _cut_words(raw.split(), entity, split_and)
    words = _trim(words, entity, articles=plain, tails=plain)
    if strip_possessive and len(words) > 1 and words[0].lower() in ("my", "our"):
        words = words[1:]
    if split_and and len(words) > 2 and words[0].lower() in ("both", "either") \
            and not {"and", "or"}.isdisjoint(w.lower() for w in words):
        words = words[1:]  # "both pizza and pasta"
    if policy == "pref":
        words = _before_clause(words)
    if not words:
        return None
    phrase = " ".join(words)
    if not entity and words[0].lower() in _CLAUSE_START:
        # A clause ("how it shows the togetherness and power you were talking about"): no
        # part of it is a thing of its own ("both X and Y" still lists two).
        return None
    parts = [phrase]
    if split_and and phrase.lower() not in _COMPOUNDS:
        parts = _joined_after_preposition([p for p in _AND_SPLIT.re.split(phrase) if p],
                                          max_words)
        parts = [" ".join(_trim(p.split(), entity, articles=plain, tails=plain)) for p in parts]
        parts = _shared_head(parts)
    cleaned = [c for c in (_finish(_titles_back(p, titles), policy, max_words, reject)
                           for p in parts) if c]
    return tuple(dict.fromkeys(cleaned)) or None


def without_titles(clause: str) -> str:
    """``clause`` with each quoted title one neutral word (what the rule gates read)."""
    return _QUOTED_TITLE.re.sub("Title", clause) if _has_quote(clause) else clause


def _title_mark(titles: list[str], title: str) -> str:
    """A stand-in for a quoted title while the object is cut and split: one word, without
    the punctuation that would end the object ("Spider-Man: No Way Home")."""
    titles.append(" ".join(title.split()))
    return f"{_TITLE_OPEN}{len(titles) - 1}{_TITLE_CLOSE}"


def _titles_back(text: str, titles: list[str]) -> str:
    for i, title in enumerate(titles):
        text = text.replace(f"{_TITLE_OPEN}{i}{_TITLE_CLOSE}", title)
    return text


def _before_clause(words: list[str]) -> list[str]:
    """A liking's words before a clause joined to it ("spicy food [and shrimp is my favorite]");
    none when a verb comes before any "and" (the whole is a clause: "making sure veterans are
    supported and valued")."""
    low = [w.lower().strip(",") for w in words]
    verb = next((i for i, w in enumerate(low) if w in _PREF_CLAUSE_VERBS), None)
    if verb is None:
        return words
    joins = [i for i, w in enumerate(low[:verb]) if w in ("and", "&")]
    return words[: joins[-1]] if joins else []


def _shared_head(parts: list[str]) -> list[str]:
    """Give one-word genres before the last item its head noun: "action" + "sci-fi movies"
    -> "action movies" (a genre alone says less: "likes action"); "pizza" + "cheese sticks"
    stay as they are (pizza is no genre)."""
    last = parts[-1].split() if parts else []
    if len(parts) < 2 or len(last) < 2 or last[-1].lower() not in _MEDIA \
            or last[-2].lower() not in _GENRES:
        return parts
    head = last[-1]
    return [f"{p} {head}" if p.lower() in _GENRES else p for p in parts[:-1]] + parts[-1:]


def _joined_after_preposition(parts: list[str], max_words: int) -> list[str]:
    """Split items joined again where a one-word item (not an activity, "-ing") follows an
    item with a preposition: "road trips with friends" + "family" is one thing liked (left
    off when the two are too long together: it is no thing of its own)."""
    out: list[str] = []
    for part in parts:
        words = part.split()
        if out and len(words) == 1 and not words[0].lower().endswith("ing") \
                and not _PREPOSITIONS.isdisjoint(w.lower() for w in out[-1].split()[1:]):
            if len(out[-1].split()) + 2 <= max_words:
                out[-1] = f"{out[-1]} and {part}"
        else:
            out.append(part)
    return out


_LOWER_PLACE_STOP = _set(
    "fear|denial|hope|peace|sin|luxury|poverty|debt|town|city|country|place|house|apartment|"
    "flat|home|tears|action|general|particular|order|love|harmony|style|comfort|misery|pain|"
    "limbo|silence|shame|hiding|secret|public|private|sync|line|charge|bed|heaven|hell|fact|"
    "theory|practice|person|response|turn|awe|dread|anticipation|progress|front|tandem|"
    "isolation|quiet|part|parts|new|old|big|small|nice|same|different|another|other|next|"
    "first|suburbs|suburb|countryside|village|neighborhood|neighbourhood|area|region|state|"
    "building|dorm|dorms|campus|shelter|van|car|basement|studio|condo|room|unit|complex|"
    "office|school|work|college|uni|university|hospital|town|downtown|uptown|midtown|"
    "team|department|role|position|job|stage|level|phase|step|side|direction|way|point|"
    "version|plan|option|idea|spot|bay|coast|east|west|north|south|lol|rn|tbh|now|sf"
)


def clean_lower_place(raw: str) -> str | None:
    """A place written in lowercase by a speaker who writes without capitals ("i moved to
    mountain view") -> "Mountain View"; None for anything that reads like a common noun."""
    cut = _HARD_CUT.re.search(raw)
    raw = raw[: cut.start()] if cut else raw
    words = _trim(_cut_words(raw.split(), True, False), True, articles=False, tails=True)
    if not words or len(words) > 3:
        return None
    low = [w.lower().rstrip(".") for w in words]
    if not all(w.isalpha() for w in low) or any(w in _LOWER_PLACE_STOP or w in ENTITY_STOP
                                                 or w in ENTITY_BAD_START for w in low):
        return None
    if low[0] in _DANGLING or (len(low) == 1 and len(low[0]) < 3):
        return None
    place = " ".join(w.capitalize() for w in low)
    return place if check_subject(place) is None else None


def clean_name(raw: str) -> str | None:
    """A person or pet name: capitalised words up to the first non-name word."""
    kept: list[str] = []
    for word in raw.split():
        if word.lower().strip("'’") in NAME_STOP:
            break
        kept.append(word)
    name = " ".join(kept)
    return name if len(name) > 1 and check_subject(name) is None else None


# A "remember ..." that counsels the one listening, not a thing to keep: it speaks to them
# (``_SECOND_PERSON``) or tells them what to do; said as "Remember, ...", it names no one
# (``_FIRST_PERSON``).
_ADVICE_START = _set("just|don't|dont|don’t|never")
_FIRST_PERSON = _set("i|i'm|i’m|i've|i'll|i'd|me|my|mine|myself|we|we're|our|ours|us")


def clean_remembered(text: str, *, counsel: bool = False) -> str | None:
    """The free fact of an explicit "remember that ..." request, or None if too short/long,
    or advice (``counsel``: said as "Remember, ...": then it must name the speaker)."""
    body = " ".join(text.split()).strip(" .,!;:")
    body = re.sub(r"(?:,?\s*(?:please|thanks|thank\s+you|ok|okay))+$", "", body, flags=re.I)
    body = body.removeprefix("that ").strip(" .,!?;:")
    if len(body.split()) < 2 or len(body) > MAX_REMEMBER_CHARS:
        return None
    words = [w.strip(".,!?;:'’\"").lower() for w in body.split()]
    if words[0] in _ADVICE_START or not _SECOND_PERSON.isdisjoint(words):
        return None  # advice to the listener ("Remember, just do it!", "... here for you")
    if counsel and _FIRST_PERSON.isdisjoint(words):
        return None
    return body

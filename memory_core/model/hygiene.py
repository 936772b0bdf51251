"""Subject and object hygiene: pure checks that keep junk out of the entity graph.

Extractors mistake software-stack tokens (``kazma_v2_4_0``, ``react@18``), pronouns ("it",
"they"), fragments ("of the") and pasted paths for subjects. ``check_subject`` names the
reason a label is rejected, so the writer can count and report rejections by reason.
``is_payload_object`` tells the writer which objects stay literals instead of becoming
entities (paths, URLs, numbers, dates, long phrases).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

RejectReason = Literal[
    "empty",
    "too_long",
    "control_chars",
    "url_or_path",
    "number_only",
    "version_string",
    "stack_token",
    "pronoun",
    "deictic",
    "fragment",
]



def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


MAX_SUBJECT_CHARS = 64
MAX_SUBJECT_WORDS = 6
MAX_ENTITY_OBJECT_CHARS = 60
MAX_ENTITY_OBJECT_WORDS = 5

#: The speaker marker used by extractors for first-person statements; always acceptable.
SPEAKER = "@speaker"

PRONOUNS = _words(
    "i me my mine myself you your yours yourself yourselves he him his himself she her hers "
    "herself it its itself we us our ours ourselves they them their theirs themselves "
    "this that these those who whom whose what which someone somebody something anyone "
    "anybody anything everyone everybody everything no-one noone nobody nothing one "
    "there here y'all ya u"
)
# A leading word that makes a label point at something outside the text ("this song").
DEICTIC_HEADS = _words(
    "this that these those your yours his her their its which what whose such same "
    "another other"
)
FUNCTION_WORDS = _words(
    "a an the of and or but nor so if then than to in on at by for with from into onto "
    "about as is are was were be been am do does did not no yes up out off over under "
    "just very too also only"
)
_EDGE_FUNCTION_WORDS = _words(
    "of and or but nor to in on at by for with from into onto as than the a an"
)

_URL_OR_PATH = re.compile(
    r"""(?ix)
    ^[a-z][a-z0-9+.-]*://            # scheme://
    | ^(?:www\.|mailto:)
    | ^(?:~|\.{1,2})?/                # /abs, ~/home, ./rel
    | ^[a-z]:\\                       # C:\
    | \\
    | \w\.(?:com|org|net|io|dev|ai|app|edu|gov|co|uk|de|fr)(?:/|$)
    | \w\.(?:py|js|ts|tsx|jsx|json|ya?ml|toml|md|txt|sh|rs|go|java|cpp?|h|hpp|html?|css|sql
           |db|log|csv|lock|cfg|ini|env|xml|pdf|png|jpe?g|gif|zip|tar|gz)$
    | \w/\w                           # a/b
    """
)
_NUMBER_ONLY = re.compile(r"^[+\-±~]?[$€£¥]?\d[\d\s,]*(?:\.\d+)?\s*%?$")
_VERSION = re.compile(
    r"""(?ix)
    ^v\d+(?:[._]\d+)*[a-z0-9.-]*$            # v2, v2.4.0, v1_2
    | \d+\.\d+\.\d+                          # 1.2.3 anywhere
    | [a-z]{2,}[-_]?v?\d+(?:[._]\d+)+        # python3.11, kazma_v2_4_0, node-18.2
    | [_-]v\d                                # name_v2
    | \w@[\^~]?\d                            # react@18
    | (?:^|\s)[\^~]\d                        # ^1.2, ~2
    """
)
_STACK = re.compile(r"[_{}\[\]<>=$`|;]|::|->|=>|\(\)|^--?\w|^#\w|\w\.\w+\(|^[a-z]+(?:\.[a-z_]+)+$")


def _clean(label: str) -> str:
    return unicodedata.normalize("NFKC", label).strip()


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in text)


def normalize_label(label: str) -> str:
    """The alias key of a label: NFKC, casefolded, whitespace collapsed and trimmed."""
    return " ".join(unicodedata.normalize("NFKC", label).casefold().split())


# Labels that name the user (the hub); the speaker label of the chat's assistant (its turns:
# recall's evidence, no belief source).
SELF_LABELS = frozenset({"user", "the user", "you", "i", "me", "myself"})
ASSISTANT_LABELS = frozenset({"assistant"})
USER, ASSISTANT = "user", "assistant"


def speaker_role(label: str) -> str | None:
    """``USER`` or ``ASSISTANT`` for a turn's speaker label of a chat's two parties, None
    for a named participant ("Caroline")."""
    norm = normalize_label(label)
    if norm in SELF_LABELS:
        return USER
    return ASSISTANT if norm in ASSISTANT_LABELS else None


def check_subject(label: str) -> RejectReason | None:
    """Why ``label`` cannot be a subject, or None when it is acceptable.

    Checks run from the cheapest and most certain to the most linguistic, so each label
    gets the most specific reason. ``SPEAKER`` ("@speaker") is always acceptable.
    """
    if not isinstance(label, str):
        return "empty"
    text = _clean(label)
    if text == SPEAKER:
        return None
    if not text:
        return "empty"
    if _has_control(text):
        return "control_chars"
    words = text.split()
    if len(text) > MAX_SUBJECT_CHARS or len(words) > MAX_SUBJECT_WORDS:
        return "too_long"
    if _URL_OR_PATH.search(text):
        return "url_or_path"
    if _NUMBER_ONLY.match(text):
        return "number_only"
    if _VERSION.search(text):
        return "version_string"
    if _STACK.search(text):
        return "stack_token"
    return _check_words(text)


def _check_words(text: str) -> RejectReason | None:
    lowered = [w.strip(".,!?;:'\"“”‘’()") for w in normalize_label(text).split()]
    lowered = [w for w in lowered if w]
    if not lowered or not any(ch.isalpha() for ch in text):
        return "fragment"
    if len(lowered) == 1 and lowered[0] in PRONOUNS:
        return "pronoun"
    if lowered[0] in DEICTIC_HEADS:
        return "deictic"
    if all(w in FUNCTION_WORDS or w in PRONOUNS for w in lowered):
        return "fragment"
    first = text.split()[0]
    if lowered[0] in _EDGE_FUNCTION_WORDS - {"a", "an", "the"} and first[:1].islower():
        return "fragment"  # "of the", "in Paris"; a title like "To Kill a Mockingbird" passes
    if len(lowered) > 1 and lowered[-1] in _EDGE_FUNCTION_WORDS:
        return "fragment"
    if len(text) < 2:
        return "fragment"
    return None


_DATE_LIKE = re.compile(
    r"""(?ix)^(?:
    \d{4}-\d{2}-\d{2}(?:[t\s][\d:.]+z?)?
    | \d{1,2}[/.]\d{1,2}[/.]\d{2,4}
    | (?:19|20)\d{2}
    | (?:\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?)?
      (?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?
      |sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?
      (?:\s+\d{1,2}(?:st|nd|rd|th)?)?(?:,?\s+(?:19|20)\d{2})?
    )$"""
)
_NUMERIC_QUANTITY = re.compile(r"^[+\-~]?[$€£¥]?\d[\d,.:]*\s*[a-z%]{0,4}$", re.IGNORECASE)


def is_payload_object(text: str) -> bool:
    """Whether an object is a payload (kept as a literal) rather than an entity to mint.

    Payloads: empty text, URLs and paths, numbers and quantities, dates, version and code
    tokens, quoted strings, ``"category: value"`` literals and long phrases.
    """
    if not isinstance(text, str):
        return True
    clean = _clean(text)
    if not clean or _has_control(clean):
        return True
    if len(clean) > MAX_ENTITY_OBJECT_CHARS or len(clean.split()) > MAX_ENTITY_OBJECT_WORDS:
        return True
    if clean[0] in "\"'“‘`" or ": " in clean:
        return True
    if _URL_OR_PATH.search(clean) or _VERSION.search(clean) or _STACK.search(clean):
        return True
    return bool(_NUMERIC_QUANTITY.match(clean) or _DATE_LIKE.match(clean))

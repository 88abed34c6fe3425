"""Query understanding without a model: analysis, follow-ups, variants, decomposition, feedback terms.

Why heuristics: the embedded model (135M) cannot classify questions or rewrite them reliably, and every node
needs a documented default when a stronger model returns garbage. These functions are pure, deterministic and
cheap (microseconds), so they are both the weak-model path and the fallback of the LLM paths.

How single-hop and multi-hop questions are told apart (English and Chinese):
- a declarative sentence without a question word is a claim to verify: single-hop;
- a comparison names two entities and asks which one, or whether both, share a property;
- a bridge question describes a second entity inside the question (a relative clause, a participle phrase,
  a relational noun such as "the director of ...", a possessive, a quoted title plus a relation), so one
  retrieval finds that entity and a second one answers about it. Each cue adds to a score; the sum decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.keyword import ENGLISH_STOP_WORDS, analyze
from state.schemas import QueryAnalysis, QueryType

# --- limits and thresholds -------------------------------------------------------------------------------

#: Bridge score from which an English question counts as multi-hop: one strong cue (a relative clause, a
#: participle phrase, a relational noun) or two weak ones (two names, a quoted title, a long question...).
MULTI_HOP_MIN_SCORE = 2
STRONG_CUE = 2
WEAK_CUE = 1
#: Highest complexity of a SIMPLE_FACT (so that it stays a direct lookup).
SIMPLE_FACT_MAX_COMPLEXITY = 3
#: Word counts from which a question gets a length cue / extra complexity.
LONG_QUESTION_WORDS = 14
VERY_LONG_QUESTION_WORDS = 22
#: Chinese characters that count as one English word when measuring length.
CJK_CHARS_PER_WORD = 2
#: Share of CJK characters from which a text is handled as Chinese.
CJK_SHARE_MIN = 0.3
#: Base complexity per query type (then adjusted by length and cue strength), clamped to 1-10.
BASE_COMPLEXITY: dict[str, int] = {
    "SIMPLE_FACT": 2,
    "AGGREGATION": 5,
    "COMPARISON": 5,
    "MULTI_HOP": 6,
    "COMPLEX_REASONING": 6,
    "OPEN_ENDED": 5,
}
MIN_COMPLEXITY = 1
MAX_COMPLEXITY = 10
#: Relevance a document needs to count for `missing_terms` / `bridge_terms` (ungraded ones, -1, always count).
RELEVANT_MIN = 0.35
#: Documents of which bridge terms are taken, and how much a document title outweighs a phrase in the text.
BRIDGE_TOP_DOCS = 3
TITLE_BONUS = 2.0
#: How much a name gains from the share of the question's terms in its sentence.
SENTENCE_OVERLAP_WEIGHT = 2.0
#: Bridge names kept must score at least this share of the best one (names as prominent as the top one).
BRIDGE_MIN_SHARE = 0.5
#: Weight of a one-word name ("American", "Ghana") against a multi-word one ("Shirley Temple").
SINGLE_WORD_WEIGHT = 0.5
#: Terms of the previous question appended to a follow-up, at most.
MAX_CARRIED_TERMS = 6
#: A follow-up with at most this many content terms (Chinese: characters) and no name is elliptical.
ELLIPTICAL_MAX_TERMS = 2
ELLIPTICAL_MAX_CJK_CHARS = 4

# --- word lists --------------------------------------------------------------------------------------------

WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
AUXILIARIES = frozenset(
    """is are was were do does did has have had can could will would should may might shall must""".split()
)
IMPERATIVES = frozenset(
    """list name explain describe tell give show compare summarize summarise find define identify state
    outline contrast enumerate""".split()
)
COPULAS = frozenset({"is", "are", "was", "were"})
PREPOSITIONS = frozenset({"in", "on", "at", "for", "from", "by", "to", "of"})
#: Nouns that name a role relative to another entity: "the director of X" needs X first (a bridge).
RELATIONAL_NOUNS = frozenset(
    """director creator founder author writer composer producer owner star singer member wife husband son
    daughter father mother brother sister parent child children spouse partner companion successor predecessor
    headquarters capital leader president ceo chairman manager coach captain designer developer publisher
    distributor host presenter inventor architect editor narrator protagonist sequel prequel adaptation
    birthplace hometown label team league company network studio band album actor actress player artist
    frontman vocalist drummer guitarist bassist nephew niece uncle aunt grandson granddaughter cousin teammate
    mentor teacher student rival ally subsidiary affiliate operator manufacturer maker builder sponsor venue
    residence namesake variant version remake successor winner runner-up""".split()
)
#: Relational nouns that just name the answer in "What is the name of X": no second entity.
NAMING_NOUNS = frozenset({"name", "title", "names", "titles", "term", "word", "kind", "type"})
#: Question openings whose copula makes the described noun the answer itself ("Who is the man who ...").
DEFINING_OPENERS = frozenset({"who", "what", "which"})
#: Words before the head noun up to which a relative clause still defines the answer ("What is the X that").
DEFINING_MAX_INDEX = 4
COMPARATIVES = frozenset(
    """older younger earlier later first last larger largest bigger smaller more less fewer longer shorter
    higher lower taller newer newest oldest better worse faster slower closer further farther greater most
    least heavier lighter wider deeper earliest latest before after bigger""".split()
)
COMPARISON_WORDS = re.compile(
    r"\b(both|same|in common|share|similar|similarity|differ|difference|different|either|neither|compare|"
    r"compared|versus|vs\.?|alike)\b",
    re.IGNORECASE,
)
RELATIVE_PRONOUN = re.compile(
    r"\b([A-Za-z'’\-]+)(,?)\s+(?:(for|with|in|of|by|on|at|from|to|under|during|about|through|into)\s+)?"
    r"(who|whom|whose|which|that|where)\s+([\w'’]+)",
    re.IGNORECASE,
)
#: Function words that cannot head a relative clause ("so that", "such that", "than that").
NON_RELATIVE_HEADS = frozenset(
    """so such than now as if and or but not because since while though although is was are were be been do
    does did has have had can could will would should may might must in of at by for with on from to about
    into""".split()
)
#: Verbs after which "that" introduces a complement ("studies show that ..."), unless a determiner precedes.
THAT_VERBS = frozenset(
    """say says said know knew known think thought believe believed mean means show shows showed suggest
    suggests suggested claim claims claimed argue argues argued report reports reported find finds found note
    notes noted prove proves proved hope hopes true fact likely possible clear evidence""".split()
)
DETERMINERS = frozenset(
    {"the", "a", "an", "this", "that", "these", "those", "its", "his", "her", "their", "our", "my"}
)
PARTICIPLE_PHRASE = re.compile(r"\b([A-Za-z'’\-]+)\s+([a-z]+)\s+(by|after|in|from|on|with|for|as|at)\b")
#: Irregular past participles (regular ones end in -ed).
IRREGULAR_PARTICIPLES = frozenset(
    """born made set sung written held led run built known found shot sold won given taken seen told bought
    brought taught put cut played drawn driven chosen shown grown thrown worn sworn begun spoken stolen hidden
    broken frozen risen fallen ridden eaten beaten forgotten kept left lost meant paid sent spent struck
    hung laid""".split()
)
NOT_PARTICIPLES = frozenset(
    {"red", "bed", "need", "speed", "seed", "hundred", "indeed", "sacred", "naked", "wicked", "feed"}
)
SUPERLATIVE_DESCRIPTION = re.compile(
    r"\b(the|[A-Za-z]['’]s)\s+(?:[a-z\-]+\s+)?(most|least|best|worst|first|second|third|fourth|fifth|last|"
    r"[a-z]{3,}est|\d+(?:st|nd|rd|th))\s+[a-z]",
    re.IGNORECASE,
)
POSSESSIVE = re.compile(r"\b([A-Z][\w.\-]*)['’]s\s+([\w\-]+)")
PASSIVE_HELPERS = frozenset(
    {"was", "were", "is", "are", "been", "be", "being", "get", "got", "has", "have", "had"}
)
QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]|(?<![A-Za-z])'([^']{2,60})'(?![A-Za-z])")
GREETINGS = re.compile(
    r"^((hi|hello|hey|hiya|yo|greetings)( there)?|good (morning|afternoon|evening|night)|"
    r"(thanks|thank you|thx|ty)( (so|very) much| a lot| again)?|cheers|bye|goodbye|see you|ok(ay)?|"
    r"cool|great|nice|how are you( doing)?|"
    r"what'?s up|who are you|what are you|nice to meet you)[\s!.?,]*$",
    re.IGNORECASE,
)
CJK_GREETINGS = re.compile(
    r"^(你好|您好|嗨|哈喽|早上好|晚上好|下午好|谢谢|多谢|感谢|再见|拜拜|你是谁|你好吗)(你|您|啦|了)?[呀啊哦吧！!。.？?～~\s]*$"
)
ARITHMETIC = re.compile(r"^[\d\s.+\-*/×÷^()%=]+$")
ARITHMETIC_PREFIX = re.compile(
    r"^(what is|what's|calculate|compute|how much is|计算|算一下)\s*", re.IGNORECASE
)
DETAIL_CUES = re.compile(
    r"\b(how(?! (many|much|old|long|far|tall|big|often|large|high|few))|details?|detailed|explain|"
    r"step by step|step-by-step|in depth|in-depth|elaborate|walk me through|describe)\b|"
    r"详细|如何|怎么|怎样|具体|步骤|原理",
    re.IGNORECASE,
)
AGGREGATION_CUES = re.compile(
    r"\b(list (all|every|the)|all (the|of the)|every|summar(y|ize|ise)|overview|enumerate|"
    r"how many .* in total|"
    r"total number|in total)\b|列出|列举|总结|概括|汇总|所有|全部|统计|一共|总共",
    re.IGNORECASE,
)
REASONING_CUES = re.compile(
    r"^(why|how (does|did|can|could|would|is|are)(?! (i|we|you)\b))\b|"
    r"\b(why|cause[sd]?|effect of|impact of|affect|reason|"
    r"implication|consequence|trade-?offs?|analy[sz]e)\b|为什么|为何|原因|影响|导致|原理|分析",
    re.IGNORECASE,
)
OPEN_CUES = re.compile(
    r"\b(what do you think|your opinion|opinions?|ideas?|suggest(ion)?s?|recommend|brainstorm|pros and cons|"
    r"should i|advice|thoughts on|best way)\b|怎么看|看法|建议|推荐|有什么想法|意见",
    re.IGNORECASE,
)
FOLLOW_UP_PRONOUNS = frozenset(
    """it its it's they them their theirs these those he him his she her hers former latter""".split()
)
#: "What about X?", "And X?": the previous question asked about another entity.
SWITCH_ENTITY = re.compile(r"^(?:and\s+)?(?:what|how)\s+about\s+(.+?)[?.!\s]*$|^and\s+(.+?)[?.!\s]*$", re.I)
FOLLOW_UP_OPENERS = re.compile(
    r"^(and|also|what about|how about|and what|why not|then|so|but|what else)\b", re.IGNORECASE
)
CJK_FOLLOW_UP_PRONOUN = re.compile(r"它|(?<!其)他|她|这个|那个|这些|那些|这位|那位|上述|前者|后者")
CJK_FOLLOW_UP = re.compile(CJK_FOLLOW_UP_PRONOUN.pattern + r"|^那|^还有|^那么|呢[？?]?$")
#: "那X呢？", "X怎么样？": the previous question asked about another entity.
CJK_SWITCH = re.compile(r"^(?:那么|那|还有)?(.{1,20}?)(?:呢|怎么样|如何)[？?]*$")
MONTHS_AND_DAYS = frozenset(
    """january february march april may june july august september october november december monday tuesday
    wednesday thursday friday saturday sunday""".split()
)
#: Capitalised words that are sentence furniture, not names.
COMMON_CAPITALISED = (
    ENGLISH_STOP_WORDS
    | WH_WORDS
    | AUXILIARIES
    | IMPERATIVES
    | MONTHS_AND_DAYS
    | frozenset("""i in on at after before during while although however also yes no""".split())
)
SENTENCE_SPLIT = re.compile(r"(?<=[a-z0-9)\]][.!?])\s+(?=[A-Z\"“'])|(?<=[。！？])")
SENTENCE_BREAK = re.compile(r"(?<=[a-z][a-z][.!?])\s+|[;:,()\[\]\"“”]")
NAME_CONNECTORS = frozenset(
    {"of", "the", "de", "la", "le", "von", "van", "da", "del", "du", "di", "&", "y", "des"}
)

# --- Chinese cues -------------------------------------------------------------------------------------------

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
CJK_TITLE = re.compile(r"[《「『“\"]([^》」』”\"]{1,40})[》」』”\"]")
CJK_COMPARISON = re.compile(
    r"((?<!是)还是(?!一)(?=.*(哪|谁|更))|哪个更|哪一个更|谁更|哪位更|哪家更|哪部更|更早|更晚|更大|更小|更多|更少|更高|更长|较早|较晚|"
    r"是否都|都是|都在|都属于|是否相同|相同吗|一样吗|是否一样|有何异同|异同|有什么区别|区别是什么|对比|相比)"
)
CJK_JOIN = re.compile(r"[和与跟及、]")
#: "the person who directed 《X》": a verb phrase modifying a role noun describes a second entity (bridge).
CJK_BRIDGE = re.compile(
    r"(执导|导演了|主演|出演|扮演|饰演|演唱|创作|创办|创立|创建|建立|发明|发现|编写|撰写|作曲|设计|出版|发行|"
    r"主持|收购|拥有|获得|效力于|毕业于|出生于|位于)[^，。？?！!、]{1,20}的(那位|那个|那部|人|导演|演员|歌手|"
    r"作者|作家|公司|球队|俱乐部|国家|城市|电影|歌曲|乐队|创始人|主人|父亲|母亲|妻子|丈夫|儿子|女儿)"
    r"[^，。？?！!]{0,20}(哪|谁|什么|几|多少)"
)
#: "《X》的导演出生于哪里": a relational noun of an entity, then a question about that entity (not "是谁").
CJK_RELATIONAL = re.compile(
    r"的(父亲|母亲|妻子|丈夫|儿子|女儿|哥哥|弟弟|姐姐|妹妹|创始人|创办人|导演|作者|主演|歌手|首都|总部|老板)"
    r"(的|(?!是|叫|为|有)[^，。？?]{0,6}(出生|毕业|来自|担任|获得|去世|就读))"
)
CJK_QUESTION_WORDS = re.compile(
    r"(为什么|为何|怎么样|怎么|怎样|如何|什么样的|什么|哪一年|哪一个|哪一位|哪些|哪个|哪里|哪儿|哪位|哪家|哪|谁|"
    r"几|多少|多久|多长|是否|吗|呢|吧)"
)
CJK_PUNCT = re.compile(r"[，。？！?!、；：:,;（）()\s]+")


@dataclass
class Signals:
    """What the analysis saw in a question (kept for debugging and tests)."""

    chinese: bool
    claim: bool = False
    comparison: bool = False
    bridge_score: int = 0
    cues: list[str] = field(default_factory=list)


# --- small text helpers ------------------------------------------------------------------------------------


def is_chinese(text: str) -> bool:
    """True when CJK characters make up at least CJK_SHARE_MIN of the letters."""
    letters = [char for char in text if char.isalnum()]
    if not letters:
        return False
    return sum(1 for char in letters if CJK.match(char)) / len(letters) >= CJK_SHARE_MIN


WORD = re.compile(r"[A-Za-z0-9\u00C0-\u024F][\w'’.\-\u00C0-\u024F]*[\w\u00C0-\u024F]|[A-Za-z0-9]")


def words_of(text: str) -> list[str]:
    """Latin words (with inner apostrophes, dots and hyphens) in order."""
    return WORD.findall(text)


def word_count(text: str) -> int:
    """Words of a text, counting CJK_CHARS_PER_WORD Chinese characters as one word."""
    return len(words_of(text)) + len(CJK.findall(text)) // CJK_CHARS_PER_WORD


def quoted_titles(text: str) -> list[str]:
    """Titles in quotes ("...", '...', “...”) or Chinese title marks (《...》, 「...」)."""
    found = [first or second for first, second in QUOTED.findall(text)]
    found += CJK_TITLE.findall(text) if CJK.search(text) else []
    return list(dict.fromkeys(title.strip() for title in found if title.strip()))


def capitalised_phrases(text: str) -> list[str]:
    """Runs of capitalised words (names, titles), joined across connectors ("of", "de") and title-internal
    function words ("The Great Locomotive Chase"), as spelled in the text ("Gerald R. Ford"); a sentence's
    first word counts only when it is not a common word ("The", "Which", "In")."""
    phrases: list[str] = []
    for sentence in SENTENCE_BREAK.split(text):
        tokens = list(WORD.finditer(sentence))
        run: list[re.Match[str]] = []
        for index, match in enumerate(tokens):
            token, lowered = match.group(0), match.group(0).lower()
            following = tokens[index + 1].group(0) if index + 1 < len(tokens) else ""
            next_is_name = (
                bool(following) and following[0].isupper() and following.lower() not in COMMON_CAPITALISED
            )
            name_word = token[0].isupper() and lowered not in COMMON_CAPITALISED
            title_word = token[0].isupper() and index > 0 and lowered not in WH_WORDS and next_is_name
            joining = bool(run) and (lowered in NAME_CONNECTORS and next_is_name or token[0].isdigit())
            if name_word or title_word or joining:
                run.append(match)
                continue
            if run:
                phrases.append(sentence[run[0].start() : run[-1].end()])
            run = []
        if run:
            phrases.append(sentence[run[0].start() : run[-1].end()])
    cleaned = [phrase.strip(" '’") for phrase in phrases]
    return list(
        dict.fromkeys(phrase for phrase in cleaned if phrase and phrase.lower() not in COMMON_CAPITALISED)
    )


#: Function characters trimmed from the ends of Chinese content pieces ("阿里巴巴是" -> "阿里巴巴").
CJK_FUNCTION_CHARS = "是的了在由有和与及被把将对从为于也都就还"


def content_words(text: str) -> list[str]:
    """Meaningful surface words of a text, in order, unique: English without stop and question words;
    Chinese as the pieces left between question words, punctuation and titles (no dictionary needed)."""
    if is_chinese(text):
        stripped = CJK_QUESTION_WORDS.sub(" ", CJK_TITLE.sub(r" \1 ", text))
        pieces = [piece.strip(CJK_FUNCTION_CHARS) for piece in CJK_PUNCT.split(stripped)]
        return list(dict.fromkeys(piece for piece in pieces if piece))
    keep = [
        word
        for word in words_of(text)
        if word.lower() not in ENGLISH_STOP_WORDS
        and word.lower() not in WH_WORDS
        and word.lower() not in AUXILIARIES
    ]
    return list(dict.fromkeys(keep))


def keyword_query(text: str) -> str:
    """The question as a keyword-only query (what BM25 ranks on, without the question's grammar)."""
    return " ".join(content_words(text))


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def dedupe(texts: Iterable[str], *, exclude: Iterable[str] = ()) -> list[str]:
    """Non-empty texts without case-insensitive duplicates (nor any text in `exclude`), order kept."""
    seen = {_norm(text) for text in exclude}
    unique: list[str] = []
    for text in texts:
        cleaned = re.sub(r"\s+", " ", text or "").strip()
        if cleaned and _norm(cleaned) not in seen:
            seen.add(_norm(cleaned))
            unique.append(cleaned)
    return unique


def _first_word(text: str) -> str:
    words = words_of(text)
    return words[0].lower() if words else ""


# --- analysis ---------------------------------------------------------------------------------------------


def needs_no_retrieval(question: str) -> bool:
    """Greetings, thanks, chit-chat and pure arithmetic: nothing in the documents can help."""
    stripped = question.strip()
    if not stripped:
        return True
    if GREETINGS.match(stripped) or CJK_GREETINGS.match(stripped):
        return True
    expression = ARITHMETIC_PREFIX.sub("", stripped).rstrip("?？ ")
    return (
        bool(expression)
        and bool(ARITHMETIC.match(expression))
        and bool(re.search(r"\d\s*[-+*/×÷^%]\s*\d", expression))
    )


def is_interrogative(question: str) -> bool:
    """A question (mark, question word, auxiliary or imperative opening) rather than a statement."""
    stripped = question.strip()
    if stripped.endswith(("?", "？")):
        return True
    first = _first_word(stripped)
    if first in WH_WORDS or first in AUXILIARIES or first in IMPERATIVES:
        return True
    if is_chinese(stripped):
        return bool(CJK_QUESTION_WORDS.search(stripped))
    # Mid-sentence "which" / "where" / "when" are mostly relative words in statements; "what" is not.
    return bool(re.search(r"\b(what|whom)\b", stripped, re.IGNORECASE))


@dataclass(frozen=True)
class RelativeClause:
    """A relative clause found in a question: the noun it describes and where it starts."""

    head: str
    head_index: int
    """Words before the head noun."""
    head_end: int
    """Character offset just after the head noun."""
    clause_start: int
    """Character offset of the relative word (or of the preposition before it)."""
    pronoun: str
    comma: bool


def relative_clauses(question: str) -> list[RelativeClause]:
    """Relative clauses: "the woman who portrayed", "the league for which", "the casino that X is on"."""
    found: list[RelativeClause] = []
    for match in RELATIVE_PRONOUN.finditer(question):
        head, comma, preposition, pronoun, _following = match.groups()
        lowered = head.lower()
        before = words_of(question[: match.start()])
        if lowered in WH_WORDS or lowered in NON_RELATIVE_HEADS or not before and not comma:
            continue
        if preposition and pronoun.lower() not in ("which", "whom"):
            continue
        if pronoun.lower() == "that" and not preposition and not comma:
            after_determiner = bool(before) and before[-1].lower() in DETERMINERS
            if (lowered in THAT_VERBS or lowered.endswith("ed")) and not after_determiner:
                continue
        found.append(
            RelativeClause(
                head=head,
                head_index=len(before),
                head_end=match.end(1),
                clause_start=match.start(3) if preposition else match.start(4),
                pronoun=pronoun.lower(),
                comma=bool(comma),
            )
        )
    return found


def _defining(lowered: list[str], index: int) -> bool:
    """Whether a description at word `index` defines the answer itself ("Who is the man who ...",
    "What is the name of the company that ..."): then it names no second entity."""
    if len(lowered) < 2 or lowered[0] not in DEFINING_OPENERS or lowered[1] not in COPULAS:
        return False
    naming = len(lowered) > 3 and lowered[3] in NAMING_NOUNS
    return index <= DEFINING_MAX_INDEX or naming and index <= DEFINING_MAX_INDEX + 3


def _relational(word: str) -> bool:
    lowered = word.lower().removeprefix("co-")
    return lowered in RELATIONAL_NOUNS or lowered.endswith("s") and lowered[:-1] in RELATIONAL_NOUNS


def _participle(word: str) -> bool:
    return (
        word in IRREGULAR_PARTICIPLES
        or len(word) >= 5
        and word.endswith("ed")
        and word not in NOT_PARTICIPLES
    )


def _joined_entities(question: str) -> tuple[str, str] | None:
    """Two capitalised phrases joined by "and" ("Scott Derrickson and Ed Wood"), or None."""
    names = capitalised_phrases(question)
    for left in names:
        for right in names:
            if left != right and re.search(
                re.escape(left) + r",?\s+and\s+(?:the\s+)?" + re.escape(right), question
            ):
                return left, right
    return None


def _english_comparison(question: str, lowered: list[str]) -> str | None:
    """The comparison cue of an English question, or None."""
    first = lowered[0] if lowered else ""
    comparative = any(word in COMPARATIVES for word in lowered)
    names = capitalised_phrases(question) + quoted_titles(question)
    joined = _joined_entities(question)
    if " or " in f" {question.lower()} " and (
        first in WH_WORDS or comparative or "which" in lowered or "who" in lowered
    ):
        return "choice between two"
    if COMPARISON_WORDS.search(question) and (" and " in question or " between " in question.lower()):
        return "shared or different property"
    if joined and first in AUXILIARIES:
        return "yes/no about two entities"
    if joined and comparative:
        return "comparative between two"
    if joined and (
        re.search(r"\b(are|were|have|do)\b", question) or all(len(side.split()) > 1 for side in joined)
    ):
        return "question about two entities"
    if comparative and len(names) >= 2 and (first in AUXILIARIES or re.search(r"\bthan\b", question)):
        return "comparative between two"
    return None


def _english_bridge(question: str, words: list[str], lowered: list[str]) -> tuple[int, list[str]]:
    """Score of the cues that a second entity is described inside the question."""
    score = 0
    cues: list[str] = []
    first = lowered[0] if lowered else ""
    clauses = relative_clauses(question)
    if clauses:
        clause = clauses[0]
        if _defining(lowered, clause.head_index) and not clause.comma:
            cues.append("relative clause defining the answer")
            score += WEAK_CUE
        else:
            cues.append(f"relative clause ({clause.head} {clause.pronoun})")
            score += STRONG_CUE
    # "When was X built in ...", "Was X directed by ...": the first participle is the main (passive) verb.
    passive_opening = first in AUXILIARIES or (
        len(lowered) > 1 and first in WH_WORDS - DEFINING_OPENERS and lowered[1] in COPULAS
    )
    for number, match in enumerate(PARTICIPLE_PHRASE.finditer(question)):
        before, participle, preposition = (
            match.group(1).lower(),
            match.group(2).lower(),
            match.group(3).lower(),
        )
        if not _participle(participle):
            continue
        index = len(words_of(question[: match.start()]))
        main_verb = passive_opening and number == 0 or _defining(lowered, index)
        if before in PASSIVE_HELPERS or main_verb:
            if preposition == "by":
                cues.append(f"passive ({participle} by)")
                score += WEAK_CUE
        elif before not in ENGLISH_STOP_WORDS and before not in WH_WORDS:
            cues.append(f"participle phrase ({before} {participle})")
            score += STRONG_CUE
        break
    for index, word in enumerate(lowered[:-1]):
        if _relational(word) and lowered[index + 1] == "of" and not _defining(lowered, index - 1):
            cues.append(f"relational noun ({word} of)")
            score += STRONG_CUE
            break
    possessive = POSSESSIVE.search(question)
    if possessive:
        index = len(words_of(question[: possessive.start()]))
        strong = _relational(possessive.group(2)) and not _defining(lowered, index)
        cues.append("possessive relation" if strong else "possessive")
        score += STRONG_CUE if strong else WEAK_CUE
    if SUPERLATIVE_DESCRIPTION.search(question):
        cues.append("superlative description")
        score += WEAK_CUE
    titles = quoted_titles(question)
    names = capitalised_phrases(question)
    if titles:
        cues.append("quoted title")
        score += WEAK_CUE
    if len(names) + len([title for title in titles if title not in names]) >= 2:
        cues.append("two named entities")
        score += WEAK_CUE
    if len(words) >= LONG_QUESTION_WORDS:
        cues.append("long question")
        score += WEAK_CUE
    if len(words) >= VERY_LONG_QUESTION_WORDS:
        score += WEAK_CUE
    if first not in WH_WORDS | AUXILIARIES | IMPERATIVES | PREPOSITIONS:
        if re.search(r"\b(what|which|who|whom|whose|when|where|how)\b", question, re.IGNORECASE):
            cues.append("statement with an embedded question")
            score += WEAK_CUE
    if "also" in lowered:
        cues.append("also: a second fact about the same entity")
        score += WEAK_CUE
    if lowered.count("of") >= 2:
        cues.append("nested of-phrases")
        score += WEAK_CUE
    return score, cues


def english_signals(question: str) -> Signals:
    """Comparison and bridge cues of an English question."""
    words = words_of(question)
    lowered = [word.lower() for word in words]
    signals = Signals(chinese=False)
    if not is_interrogative(question):
        signals.claim = True
        signals.cues.append("statement: a claim to verify")
        return signals
    comparison = _english_comparison(question, lowered)
    if comparison:
        signals.comparison = True
        signals.cues.append(comparison)
    signals.bridge_score, cues = _english_bridge(question, words, lowered)
    signals.cues.extend(cues)
    return signals


def chinese_signals(question: str) -> Signals:
    """Comparison and bridge cues of a Chinese question."""
    signals = Signals(chinese=True)
    comparison = CJK_COMPARISON.search(question)
    two_things = bool(CJK_JOIN.search(question)) or "还是" in question
    if comparison and two_things:
        signals.comparison = True
        signals.cues.append(f"比较 ({comparison.group(0)})")
    if CJK_BRIDGE.search(question):
        signals.bridge_score += MULTI_HOP_MIN_SCORE
        signals.cues.append("定语从句描述另一实体")
    if CJK_RELATIONAL.search(question):
        signals.bridge_score += MULTI_HOP_MIN_SCORE
        signals.cues.append("关系名词链")
    return signals


def question_signals(question: str) -> Signals:
    """The cues of a question in its language."""
    return chinese_signals(question) if is_chinese(question) else english_signals(question)


def _query_type(question: str, signals: Signals) -> QueryType:
    if signals.comparison:
        return "COMPARISON"
    if signals.bridge_score >= MULTI_HOP_MIN_SCORE and not signals.claim:
        return "MULTI_HOP"
    if OPEN_CUES.search(question):
        return "OPEN_ENDED"
    if AGGREGATION_CUES.search(question):
        return "AGGREGATION"
    if REASONING_CUES.search(question) and not signals.claim:
        return "COMPLEX_REASONING"
    return "SIMPLE_FACT"


def _complexity(question: str, query_type: QueryType, signals: Signals) -> int:
    value = BASE_COMPLEXITY[query_type]
    words = word_count(question)
    value += int(words >= LONG_QUESTION_WORDS) + int(words >= VERY_LONG_QUESTION_WORDS)
    if query_type == "MULTI_HOP":
        value += max(0, signals.bridge_score - MULTI_HOP_MIN_SCORE - 1)
    if query_type == "SIMPLE_FACT":
        value = min(value, SIMPLE_FACT_MAX_COMPLEXITY)
    return max(MIN_COMPLEXITY, min(MAX_COMPLEXITY, value))


def heuristic_analysis(question: str) -> QueryAnalysis:
    """Classify a question without a model (the weak-model path and the LLM analyzer's default)."""
    text = question.strip()
    if needs_no_retrieval(text):
        return QueryAnalysis(
            query_type="SIMPLE_FACT",
            complexity=1,
            needs_retrieval=False,
            wants_details=False,
            source="heuristic",
        )
    signals = question_signals(text)
    query_type = _query_type(text, signals)
    return QueryAnalysis(
        query_type=query_type,
        complexity=_complexity(text, query_type, signals),
        needs_retrieval=True,
        wants_details=bool(DETAIL_CUES.search(text)),
        source="heuristic",
    )


def is_multi_hop(analysis: QueryAnalysis) -> bool:
    """The router's view: MULTI_HOP and COMPARISON need more than one retrieval."""
    return analysis.query_type in ("MULTI_HOP", "COMPARISON")


# --- follow-ups ------------------------------------------------------------------------------------------


def _pronoun_before_name(text: str) -> bool:
    """A third-person pronoun that cannot point at a name of the same question (it comes first, or there is
    no name at all): "Does it support PDF?" leans on the conversation, "Did Einstein like his work?" not."""
    names = capitalised_phrases(text)
    first_name = min((text.find(name) for name in names if name in text), default=len(text))
    return any(
        match.group(0).lower() in FOLLOW_UP_PRONOUNS and match.start() < first_name
        for match in re.finditer(r"\b[A-Za-z']+\b", text)
    )


def is_follow_up(question: str) -> bool:
    """Whether a question leans on the conversation (pronouns, ellipsis, "what about ...")."""
    text = question.strip()
    if is_chinese(text):
        return bool(CJK_FOLLOW_UP.search(text)) or len(CJK.findall(text)) <= ELLIPTICAL_MAX_CJK_CHARS
    if not words_of(text):
        return False
    if FOLLOW_UP_OPENERS.match(text) or _pronoun_before_name(text):
        return True
    return len(content_words(text)) <= ELLIPTICAL_MAX_TERMS and not capitalised_phrases(text)


def salient_terms(text: str) -> list[str]:
    """The terms that carry a question's topic: titles and names first, then the other content words."""
    if is_chinese(text):
        return dedupe([*quoted_titles(text), *content_words(text)])
    names = [*quoted_titles(text), *capitalised_phrases(text)]
    covered = {word.lower() for name in names for word in words_of(name)}
    others = [word for word in content_words(text) if word.lower() not in covered]
    return dedupe([*names, *others])


def _switched_subject(question: str, previous: str) -> str | None:
    """ "What about Tesla?" after "Who founded SpaceX?" -> "Who founded Tesla?" (the same question asked of
    another entity); None when the follow-up is not of that form or the previous question names nothing."""
    if is_chinese(question):
        match = CJK_SWITCH.match(question.strip())
        if not match or CJK_FOLLOW_UP_PRONOUN.search(match.group(1)):
            return None
        new_subject = match.group(1).strip()
        old_subjects = [*quoted_titles(previous), *content_words(previous)]
    else:
        match = SWITCH_ENTITY.match(question.strip())
        if not match:
            return None
        new_subject = (match.group(1) or match.group(2) or "").strip()
        if not capitalised_phrases(new_subject) and not quoted_titles(new_subject):
            return None
        old_subjects = [*quoted_titles(previous), *capitalised_phrases(previous)]
    if not new_subject or not old_subjects or old_subjects[0] not in previous:
        return None
    return previous.replace(old_subjects[0], new_subject, 1)


def heuristic_standalone(question: str, history_texts: Sequence[str]) -> str:
    """A follow-up made self-contained from the previous user questions (`history_texts`, oldest first).

    "What about X?" / "那X呢？" re-asks the previous question about X; any other follow-up (pronouns,
    ellipsis) gets the salient terms of the latest previous question appended in parentheses. A
    self-contained question comes back unchanged, and so does any question when there is no history.
    """
    text = question.strip()
    if not history_texts or not is_follow_up(text):
        return text
    switched = _switched_subject(text, history_texts[-1])
    if switched:
        return switched
    present = {_norm(term) for term in content_words(text)}
    text_terms = set(analyze(text))
    for previous in reversed(history_texts):
        carried = [
            term
            for term in salient_terms(previous)
            if _norm(term) not in present and not set(analyze(term)) <= text_terms
        ][:MAX_CARRIED_TERMS]
        if carried:
            if is_chinese(text):
                return f"{text}（{' '.join(carried)}）"
            return f"{text} ({' '.join(carried)})"
    return text


# --- variants and decomposition -------------------------------------------------------------------------


def _strip_question(text: str) -> str:
    return text.strip().rstrip("?？.。!！ ").strip()


def _comparison_entities(question: str) -> tuple[list[str], str]:
    """The entities a comparison is about and the property asked (the rest, without comparison words)."""
    text = _strip_question(question)
    if is_chinese(text):
        match = re.search(r"(.+?)还是(.+)", text)
        pair = re.search(
            r"([^，,和与跟及、]{1,12})[和与跟及、]([^，,和与跟及、]{1,12}?)(?=[都是在哪谁的更比有])", text
        )
        if match:
            left, right = CJK_JOIN.split(match.group(1))[-1], re.split(r"[，,]", match.group(2))[0]
            rest = text.replace(left, "", 1).replace(right, "", 1).replace("还是", "")
        elif pair:
            left, right = pair.group(1), pair.group(2)
            rest = text[pair.end() :]
        else:
            return [], ""
        prop = CJK_COMPARISON.sub("", CJK_QUESTION_WORDS.sub("", rest)).strip(CJK_FUNCTION_CHARS + "，, ")
        return [entity.strip(CJK_FUNCTION_CHARS) for entity in (left, right) if entity.strip()], prop
    choice = re.search(
        r"(?:,|:|\bbetween\b|\bout of\b)\s*(?:the\s+)?([^,:?]+?),?\s+(?:or|and)\s+(?:the\s+)?([^,?]+)", text
    )
    entities: list[str] = []
    if choice and " or " in text:
        entities = [choice.group(1), choice.group(2)]
    else:
        joined = _joined_entities(text)
        names = [*quoted_titles(text), *capitalised_phrases(text)]
        entities = list(joined) if joined else names[:2]
    entities = [re.sub(r"^(the|both)\s+", "", entity.strip(), flags=re.IGNORECASE) for entity in entities]
    rest = text
    for entity in entities:
        rest = rest.replace(entity, " ")
    property_words = [
        word
        for word in content_words(rest)
        if not COMPARISON_WORDS.fullmatch(word) and word.lower() not in {"or", "and", "between", "out"}
    ]
    return [entity for entity in entities if entity], " ".join(property_words)


def _bridge_split(question: str) -> tuple[str, str] | None:
    """(inner question, outer question) of an English bridge question, or None when none is found.

    "What position was held by the woman who portrayed X?" -> ("Who is the woman who portrayed X?",
    "What position was held by the woman?"): the inner one finds the bridge entity, the outer one is asked
    about it once it is known.
    """
    text = _strip_question(question)
    lowered = [word.lower() for word in words_of(text)]
    for clause in relative_clauses(text):
        if _defining(lowered, clause.head_index) and not clause.comma:
            continue
        before = text[: clause.head_end]
        phrase_match = re.search(
            r"((?:the|a|an|this|that|its|his|her|their)\s+(?:[\w'’\-]+\s+){0,3}"
            + re.escape(clause.head)
            + r")$",
            before,
            re.IGNORECASE,
        )
        phrase = phrase_match.group(1) if phrase_match else clause.head
        rest = text[clause.clause_start :]
        outer_tail = ""
        if clause.comma and "," in rest:
            rest, outer_tail = rest.split(",", 1)
        elif lowered[:1] and lowered[0] in WH_WORDS and lowered[1:2] and lowered[1] in AUXILIARIES:
            # "When was the company that owns X founded": the last word is the main verb, not the clause's.
            tokens = rest.split()
            if len(tokens) > 3 and tokens[-1].islower() and tokens[-2][:1].isupper():
                rest, outer_tail = " ".join(tokens[:-1]), tokens[-1]
        asker = "Who" if clause.pronoun in ("who", "whom", "whose") else "What"
        inner = f"{asker} is {phrase[0].lower() + phrase[1:]} {rest.strip()}"
        outer = f"{before.rstrip(',')} {outer_tail.strip()}".strip()
        return f"{inner}?", f"{outer}?"
    relation = re.search(
        r"\b((?i:the)\s+([\w\-]+)\s+of\s+[^,?]+?)(?=\s+(?:is|was|are|were|has|had|did|does)\b|$)", text
    )
    if relation and _relational(relation.group(2)):
        asker = (
            "Who"
            if relation.group(2).lower() not in {"headquarters", "capital", "company", "label", "team"}
            else "What"
        )
        phrase = relation.group(1)
        return f"{asker} is {phrase[0].lower() + phrase[1:]}?", f"{text}?"
    return None


def heuristic_subquestions(question: str, max_n: int) -> list[str]:
    """Simpler questions whose answers together answer `question` (empty when it does not split).

    - comparison ("X or Y", "both X and Y"): one question per entity about the compared property;
    - bridge (relative clause, "the director of ..."): the inner question that finds the bridge entity,
      then the outer question about it;
    - several clauses joined by "and" / "以及" / "；": one question per clause.
    """
    text = question.strip()
    if not text or max_n < 1:
        return []
    signals = question_signals(text)
    pieces: list[str] = []
    if signals.comparison:
        entities, prop = _comparison_entities(text)
        if len(entities) >= 2:
            if is_chinese(text):
                pieces = [f"{entity}{prop}".strip() for entity in entities]
            else:
                pieces = [f"{entity} {prop}".strip() for entity in entities]
    if not pieces and not signals.chinese:
        split = _bridge_split(text)
        if split:
            pieces = list(split)
    if not pieces:
        if signals.chinese:
            clauses = re.split(r"[；;]|，?以及|，并且|，另外", _strip_question(text))
        else:
            clauses = re.split(
                r",?\s+and\s+(?=(?:what|which|who|whom|when|where|why|how|is|are|was|were|do|does|did)\b)",
                _strip_question(text),
                flags=re.IGNORECASE,
            )
        if len(clauses) >= 2:
            mark = "？" if signals.chinese else "?"
            pieces = [clause.strip() + mark for clause in clauses if clause.strip()]
            if not signals.chinese:
                pieces = [piece[0].upper() + piece[1:] for piece in pieces]
    return dedupe(pieces, exclude=[text])[:max_n]


def _inflections(word: str) -> list[str]:
    """Singular/plural alternates of an English noun (companies <-> company, film <-> films)."""
    lowered = word.lower()
    if not (lowered.isascii() and lowered.isalpha()) or len(lowered) < 4 or word[0].isupper():
        return []
    if lowered.endswith("ies"):
        return [lowered[:-3] + "y"]
    if lowered.endswith("s") and not lowered.endswith("ss"):
        return [lowered[:-1]]
    if lowered.endswith("y") and lowered[-2] not in "aeiou":
        return [lowered[:-1] + "ies"]
    if lowered.endswith(("ed", "ing", "ly")):
        return []
    return [lowered + "es" if lowered.endswith(("s", "x", "ch", "sh")) else lowered + "s"]


def heuristic_expansion(question: str) -> str:
    """Expanded keywords without a model: names and titles first, the other content words, and their
    singular/plural alternates. (Synonyms and related terms need a language model: the LLM path adds them.)"""
    names = [*quoted_titles(question), *([] if is_chinese(question) else capitalised_phrases(question))]
    words = content_words(question)
    alternates = [alternate for word in words for alternate in _inflections(word)]
    return " ".join(dedupe([*names, *words, *alternates]))


def heuristic_variants(question: str, n: int) -> list[str]:
    """Up to `n` alternative search queries: sub-questions, the keyword-only form, the names, expansion."""
    text = question.strip()
    if n < 1 or not text:
        return []
    names = [*quoted_titles(text), *([] if is_chinese(text) else capitalised_phrases(text))]
    candidates = [
        *heuristic_subquestions(text, n),
        keyword_query(text),
        " ".join(dedupe(names)),
        heuristic_expansion(text),
    ]
    return dedupe(candidates, exclude=[text])[:n]


# --- feedback from retrieved documents -------------------------------------------------------------------


def _relevant(documents: Sequence[Mapping[str, Any]], min_relevance: float) -> list[Mapping[str, Any]]:
    graded = [doc for doc in documents if float(doc.get("relevance", -1)) >= min_relevance]
    ungraded = [doc for doc in documents if float(doc.get("relevance", -1)) < 0]
    return sorted(graded, key=lambda doc: float(doc.get("relevance", 0)), reverse=True) + ungraded


def missing_terms(
    question: str, documents: Sequence[Mapping[str, Any]], min_relevance: float = RELEVANT_MIN
) -> list[str]:
    """The question's content words (surface form) found in no relevant document: what to search for next.

    Words are compared by their index terms (stems; Chinese bigrams), so "portrayed" is found in "portray".
    """
    relevant = _relevant(documents, min_relevance)
    covered: set[str] = set()
    for doc in relevant:
        covered |= set(analyze(f"{doc.get('title', '')}\n{doc.get('text', '')}"))
    missing: list[str] = []
    for word in content_words(question):
        terms = analyze(word)
        if terms and not set(terms) <= covered:
            missing.append(word)
    return missing


def surface_terms(question: str, terms: Sequence[str]) -> list[str]:
    """Index terms (stems, as grade_retrieval reports them) mapped back to the question's own words."""
    wanted = set(terms)
    words = [word for word in content_words(question) if set(analyze(word)) & wanted]
    known = {stem for word in words for stem in analyze(word)}
    return dedupe([*words, *(term for term in terms if term not in known)])


def bridge_terms(
    question: str, documents: Sequence[Mapping[str, Any]], limit: int, min_relevance: float = RELEVANT_MIN
) -> list[str]:
    """Names and titles in the best relevant documents that the question does not mention.

    For a bridge question the first retrieval finds the document about the described entity; the entity's
    name (often that document's title) is what the next hop must search for.
    """
    if limit < 1:
        return []
    question_terms = set(analyze(question))
    scores: dict[str, float] = {}
    spelled: dict[str, str] = {}
    for rank, doc in enumerate(_relevant(documents, min_relevance)[:BRIDGE_TOP_DOCS]):
        weight = 1.0 / (rank + 1)
        title = re.sub(r"\s*\([^)]*\)\s*$", "", str(doc.get("title", ""))).strip()
        candidates = [(title, TITLE_BONUS)] if title else []
        for sentence in SENTENCE_SPLIT.split(str(doc.get("text", ""))):
            # A name in a sentence that shares the question's words is likelier the entity asked about.
            overlap = len(set(analyze(sentence)) & question_terms) / max(1, len(question_terms))
            found = [
                *quoted_titles(sentence),
                *([] if is_chinese(sentence) else capitalised_phrases(sentence)),
            ]
            candidates += [(phrase, 1.0 + SENTENCE_OVERLAP_WEIGHT * overlap) for phrase in found]
        for phrase, bonus in candidates:
            bonus *= 1.0 if len(phrase.split()) > 1 or CJK.search(phrase) else SINGLE_WORD_WEIGHT
            terms = set(analyze(phrase))
            if not terms or terms <= question_terms or phrase.lower() in COMMON_CAPITALISED:
                continue
            key = _norm(phrase)
            spelled.setdefault(key, phrase)
            scores[key] = scores.get(key, 0.0) + weight * bonus
    ranked = sorted(scores, key=lambda key: (-scores[key], len(key)))
    chosen: list[str] = []
    for key in ranked:
        terms = set(analyze(key))
        if scores[key] < BRIDGE_MIN_SHARE * scores[ranked[0]]:
            break
        if any(terms <= set(analyze(other)) or terms >= set(analyze(other)) for other in chosen):
            continue  # "Shirley Temple Black" after "Shirley Temple": the same entity
        chosen.append(spelled[key])
        if len(chosen) == limit:
            break
    return chosen

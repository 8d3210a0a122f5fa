//! The English words the conflict rules read: what announces a correction,
//! what adds to a fact instead, what scopes it to one instance or to the
//! past, and which words are values rather than subjects.

/// Words that carry no subject.
pub const STOPWORDS: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "am", "to", "of", "in", "on", "at", "for",
    "with", "by", "from", "and", "or", "but", "it", "its", "this", "that", "these", "those", "as", "has", "have",
    "had", "do", "does", "did", "will", "would", "should", "can", "could", "i", "we", "you", "he", "she", "they", "my",
    "our", "your", "his", "her", "their", "me", "us", "them", "so", "then", "than", "there", "here", "also", "just",
    "into", "about", "over", "under", "up", "down", "out", "all", "any", "some", "every", "each", "what", "which",
    "who", "when", "where", "how", "why", "use", "uses", "used", "using", "per", "via", "its",
];

/// Words and phrases that say outright that a statement replaces an
/// earlier one: with one shared subject word, a correction.
pub const EXPLICIT_CUES: &[&str] = &[
    "correction",
    "corrected",
    "actually",
    "instead",
    "anymore",
    "wrong",
    "update",
    "updated",
    "no longer",
    "not anymore",
    "any more",
    "from now on",
    "as of",
    "these days",
    "nowadays",
    "rather than",
    "is done with",
    "gave up",
    "stepped down",
];

/// Verbs of change, with their inflections (not the -ing forms: "Erin is
/// moving to the cottage" tells a plan). Each has other senses ("moved
/// the couch", "switched tea brands"), so a verb counts as a correction
/// only when the two texts also state different values of one kind.
pub const CHANGE_VERBS: &[&str] = &[
    "move",
    "moved",
    "moves",
    "change",
    "changed",
    "changes",
    "rename",
    "renamed",
    "reschedule",
    "rescheduled",
    "postpone",
    "postponed",
    "replace",
    "replaced",
    "replaces",
    "switch",
    "switched",
    "switches",
    "reassign",
    "reassigned",
    "upgrade",
    "upgraded",
    "downgrade",
    "downgraded",
    "migrate",
    "migrated",
    "cancel",
    "cancelled",
    "canceled",
    "pushed",
    "delayed",
    "bumped",
    "slipped",
    "rebranded",
    "reverted",
    "transferred",
    "relocated",
    "retired",
    "resigned",
    "quit",
    "sold",
    "disabled",
    "enabled",
    "reopened",
    "closed",
    "promoted",
    "flipped",
    "rewritten",
    "took over",
    "takes over",
    "taken over",
    "handed over",
    "turned off",
    "turned on",
    "switched off",
    "switched on",
    "left the",
];

/// Words that often announce a replacement but also appear in plain
/// statements: they need two shared subject words, and "new" counts only
/// before one of them ("the new office", not "two new engineers").
pub const WEAK_CUES: &[&str] = &["now", "new", "starting", "started", "stopped", "again", "currently"];

/// Words by which a statement adds to what is stored rather than replacing
/// it ("Ken also likes blues", "a second standup", "my other sister").
pub const ADDITIONS: &[&str] = &[
    "also",
    "too",
    "as well",
    "another",
    "additionally",
    "in addition",
    "second",
    "besides",
    "other",
];

/// Words that place a fact in the past ("I used to live in Lyon", "on
/// Postgres 12 until the upgrade"): a statement of what held then does
/// not contradict what holds now.
pub const HISTORY: &[&str] = &[
    "used to",
    "until",
    "formerly",
    "previously",
    "back in",
    "back then",
    "ago",
    "when i was",
    "in college",
    "as a kid",
    "originally",
    "at first",
];

/// Environments and stages: a fact about staging says nothing about prod.
pub const ENVIRONMENTS: &[&str] = &[
    "prod",
    "production",
    "staging",
    "stage",
    "dev",
    "development",
    "test",
    "testing",
    "qa",
    "sandbox",
    "preview",
    "canary",
    "local",
    "load-test",
    "uat",
];

/// Words that make a number approximate ("about $30" and "$29" agree).
pub const APPROXIMATE: &[&str] = &["about", "around", "roughly", "approximately", "almost", "nearly", "~"];

pub const NEGATIONS: &[&str] = &["not", "no", "never", "none", "nobody", "nothing", "cannot"];

/// Weekdays and times of day: values of the kind `Date`.
pub const DAY_WORDS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "noon",
    "midnight",
    "morning",
    "afternoon",
    "evening",
    "tonight",
    "tomorrow",
    "yesterday",
    "today",
];

/// Months, full and short, by number ("may" only next to a day: it is a
/// verb as often).
pub const MONTHS: &[(&str, u32)] = &[
    ("january", 1),
    ("jan", 1),
    ("february", 2),
    ("feb", 2),
    ("march", 3),
    ("mar", 3),
    ("april", 4),
    ("apr", 4),
    ("may", 5),
    ("june", 6),
    ("jun", 6),
    ("july", 7),
    ("jul", 7),
    ("august", 8),
    ("aug", 8),
    ("september", 9),
    ("sep", 9),
    ("sept", 9),
    ("october", 10),
    ("oct", 10),
    ("november", 11),
    ("nov", 11),
    ("december", 12),
    ("dec", 12),
];

pub const NUMBER_WORDS: &[&str] = &[
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "twenty", "thirty", "forty", "fifty", "hundred", "thousand", "million",
];

/// Currencies written after an amount ("1,450 euros").
pub const CURRENCIES: &[&str] = &[
    "euro", "euros", "eur", "dollar", "dollars", "usd", "pound", "pounds", "gbp", "yen", "chf", "francs",
];

/// Words that state what condition something is in: two of them on the
/// same subject are two values of one attribute.
pub const STATES: &[&str] = &[
    "enabled",
    "disabled",
    "active",
    "inactive",
    "online",
    "offline",
    "paused",
    "resumed",
    "deprecated",
    "healthy",
    "degraded",
    "available",
    "unavailable",
    "approved",
    "rejected",
    "pending",
    "waiting",
    "blocked",
    "unblocked",
    "open",
    "closed",
    "resolved",
    "merged",
    "shipped",
    "released",
    "launched",
    "completed",
    "finished",
    "done",
    "cancelled",
    "canceled",
    "single",
    "married",
    "engaged",
    "divorced",
    "dating",
    "employed",
    "unemployed",
    "vegetarian",
    "vegan",
    "pescatarian",
    "remote",
    "onsite",
    "on-site",
    "in-office",
    "full-time",
    "part-time",
    "freelance",
    "retired",
    "allowed",
    "forbidden",
    "mandatory",
    "optional",
    "public",
    "private",
    "archived",
];

/// Words that say who is in charge of something: two statements that
/// differ only in the person before one of them name two holders of one
/// role ("Maria leads the payments team" / "Tom leads the payments team").
pub const ROLES: &[&str] = &[
    "lead",
    "leads",
    "led",
    "head",
    "heads",
    "headed",
    "manage",
    "manages",
    "managed",
    "own",
    "owns",
    "owned",
    "owner",
    "run",
    "runs",
    "chair",
    "chairs",
    "maintain",
    "maintains",
    "maintainer",
    "captain",
    "responsible",
    "on-call",
    "call",
];

/// Words of one meaning, read as the first ("the report is due" and "the
/// report's deadline" share a subject).
pub const SYNONYMS: &[(&str, &str)] = &[
    ("deadline", "due"),
    ("lead", "lead"),
    ("head", "lead"),
    ("manage", "lead"),
    ("runs", "run"),
    ("based", "live"),
    ("reside", "live"),
    ("price", "cost"),
    ("costs", "cost"),
    ("begin", "start"),
    ("finish", "end"),
];

/// People and things that belong to someone: "Raj's wife prefers coffee"
/// is not about Raj.
pub const RELATIONS: &[&str] = &[
    "wife",
    "husband",
    "partner",
    "spouse",
    "son",
    "daughter",
    "kid",
    "kids",
    "child",
    "children",
    "mother",
    "father",
    "mom",
    "mum",
    "dad",
    "parent",
    "parents",
    "sister",
    "brother",
    "sibling",
    "friend",
    "boss",
    "colleague",
    "cousin",
    "aunt",
    "uncle",
    "niece",
    "nephew",
    "grandmother",
    "grandfather",
    "dog",
    "cat",
    "pet",
    "roommate",
    "neighbour",
    "neighbor",
];

/// Words of a preference that holds one value at a time ("prefers
/// sencha", "favourite tea is gyokuro"): another object is another value.
pub const EXCLUSIVE_PREFERENCES: &[&str] = &["prefer", "prefers", "preferred", "favourite", "favorite"];

/// Words that make a text a statement about its writer ("I", "my").
/// "We" and "our" too: the writer's household or team.
pub const FIRST_PERSON: &[&str] = &[
    "i", "i'm", "i’m", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "we", "we're", "we've", "our", "us",
];

/// Words after which "on" and "off" are states ("the flag is off",
/// "flipped on").
pub const SWITCHED: &[&str] = &["is", "are", "was", "flipped", "turned", "switched", "toggled", "set"];

/// Words before a name that make it the value being replaced ("took over
/// from Dana", "replaced Jenkins with …"), not the new one.
pub const FORMER: &[&str] = &["from", "replaced", "replace", "replacing"];

/// Whether `text` (lower case, words separated by single spaces, with a
/// space at each end) holds one of `list`, each a word or a phrase.
pub fn holds(text: &str, list: &[&str]) -> bool {
    list.iter().any(|w| text.contains(&format!(" {w} ")))
}

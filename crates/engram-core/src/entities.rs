//! The named things a memory is about (docs/TIME_AND_ENTITIES.md): people,
//! organisations, projects, products, places, ids (ticket and error codes),
//! @handles, emails and URLs, found in its content by rules, without a
//! model. Tags `entity:NAME` add one by hand.
//!
//! - emails, URLs, @handles and ids have a shape of their own;
//! - names are runs of capitalised words ("Vera", "Acme Corp", "New York",
//!   "Bank of Lyon"), with a few connectors inside ("of", "de", "van", "&");
//!   a run at the start of a sentence counts only when its first word is
//!   not a common word ("The", "Yesterday", "Deploy" never are names), and
//!   weekdays, months and the like never do;
//! - a name's kind comes from its words and neighbours: "Corp", "Inc",
//!   "University" make an organisation; "Street", "City", or "in"/"at"/
//!   "from" before it a place; "project" next to it a project; an inner
//!   capital ("PostgreSQL", "iPhone") or a version after it a product;
//!   two capitalised words, a possessive or a verb after a single one a
//!   person; anything else a `thing`.
//!
//! Matching is case- and accent-insensitive: [`key`] folds "José", "jose"
//! and "JOSE" to one key. The rules are English and deliberately simple;
//! `tests/tests/entities.rs` measures their precision and recall on
//! `tests/data/entities.json`.

/// What a named thing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Person,
    Organization,
    Project,
    Product,
    Service,
    Place,
    Id,
    Handle,
    Email,
    Url,
    Thing,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Person => "person",
            Kind::Organization => "organization",
            Kind::Project => "project",
            Kind::Product => "product",
            Kind::Service => "service",
            Kind::Place => "place",
            Kind::Id => "id",
            Kind::Handle => "handle",
            Kind::Email => "email",
            Kind::Url => "url",
            Kind::Thing => "thing",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        [
            Kind::Person,
            Kind::Organization,
            Kind::Project,
            Kind::Product,
            Kind::Service,
            Kind::Place,
            Kind::Id,
            Kind::Handle,
            Kind::Email,
            Kind::Url,
            Kind::Thing,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// One named thing of a text: its name as written, its kind, and the key
/// that matches it case- and accent-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    pub name: String,
    pub key: String,
    pub kind: Kind,
}

/// Longest name kept (characters); a longer run is not a name.
pub const MAX_NAME_CHARS: usize = 100;
/// Most entities taken from one memory.
pub const MAX_PER_MEMORY: usize = 32;
/// Bytes of a memory's content read for entities: the rules run in the
/// write's transaction, so their cost is bounded whatever the content's
/// size (up to 256 KiB); the start of a memory names what it is about.
pub const MAX_SCANNED_BYTES: usize = 16 * 1024;

/// The matching key of a name: lower case, accents folded, inner spaces
/// single, and a hyphen or underscore between two letters or digits read
/// as a space ("José  Díaz" -> "jose diaz"; "Billing-API", "billing_api"
/// and "billing api" -> "billing api").
pub fn key(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let chars: Vec<char> = name.trim().chars().collect();
    // (emails, URLs, handles and names with digits keep their separators:
    // "john_doe@x" and "john-doe@x" are two addresses, OPS-77 and ops-77
    // are one ticket, not "ops 77")
    let id_like = name.chars().any(|c| c.is_ascii_digit());
    let folds = !id_like && !name.contains(['@', '/', '#', ':']);
    for (i, &c) in chars.iter().enumerate() {
        let joins = folds
            && matches!(c, '-' | '_')
            && i > 0
            && chars[i - 1].is_alphanumeric()
            && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric());
        if c.is_whitespace() || joins {
            if !out.ends_with(' ') {
                out.push(' ');
            }
            continue;
        }
        match fold(c) {
            Some(s) => out.push_str(s),
            None => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// The ASCII letters of an accented Latin letter (either case).
fn fold(c: char) -> Option<&'static str> {
    Some(match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' | 'À' | 'Á' | 'Â' | 'Ã' | 'Ä' | 'Å' | 'Ā' | 'Ă' | 'Ą' => {
            "a"
        }
        'æ' | 'Æ' => "ae",
        'ç' | 'ć' | 'č' | 'Ç' | 'Ć' | 'Č' => "c",
        'ď' | 'đ' | 'Ď' | 'Đ' => "d",
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ę' | 'ě' | 'È' | 'É' | 'Ê' | 'Ë' | 'Ē' | 'Ę' | 'Ě' => "e",
        'ğ' | 'Ğ' => "g",
        'ì' | 'í' | 'î' | 'ï' | 'ī' | 'ı' | 'Ì' | 'Í' | 'Î' | 'Ï' | 'Ī' | 'İ' => "i",
        'ł' | 'ľ' | 'Ł' | 'Ľ' => "l",
        'ñ' | 'ń' | 'ň' | 'Ñ' | 'Ń' | 'Ň' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ő' | 'Ò' | 'Ó' | 'Ô' | 'Õ' | 'Ö' | 'Ø' | 'Ō' | 'Ő' => {
            "o"
        }
        'œ' | 'Œ' => "oe",
        'ř' | 'Ř' => "r",
        'ś' | 'š' | 'ş' | 'Ś' | 'Š' | 'Ş' => "s",
        'ß' => "ss",
        'ť' | 'ţ' | 'Ť' | 'Ţ' => "t",
        'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' | 'ű' | 'Ù' | 'Ú' | 'Û' | 'Ü' | 'Ū' | 'Ů' | 'Ű' => "u",
        'ý' | 'ÿ' | 'Ý' | 'Ÿ' => "y",
        'ź' | 'ż' | 'ž' | 'Ź' | 'Ż' | 'Ž' => "z",
        _ => return None,
    })
}

/// Capitalised words that are not names: pronouns, determiners, question
/// words, time words and the common words a sentence starts with.
const COMMON: &[&str] = &[
    "a",
    "about",
    "above",
    "actually",
    "after",
    "again",
    "all",
    "also",
    "always",
    "an",
    "and",
    "another",
    "any",
    "anyone",
    "anything",
    "are",
    "as",
    "ask",
    "asked",
    "at",
    "back",
    "be",
    "because",
    "been",
    "before",
    "being",
    "best",
    "both",
    "but",
    "by",
    "call",
    "can",
    "cannot",
    "check",
    "could",
    "daily",
    "did",
    "do",
    "does",
    "done",
    "dont",
    "during",
    "each",
    "either",
    "else",
    "even",
    "ever",
    "every",
    "everyone",
    "everything",
    "few",
    "find",
    "first",
    "for",
    "from",
    "get",
    "give",
    "go",
    "good",
    "great",
    "had",
    "has",
    "have",
    "he",
    "her",
    "here",
    "hers",
    "hey",
    "hi",
    "him",
    "his",
    "how",
    "however",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "just",
    "keep",
    "last",
    "later",
    "let",
    "lets",
    "like",
    "make",
    "many",
    "may",
    "maybe",
    "me",
    "meanwhile",
    "more",
    "most",
    "much",
    "must",
    "my",
    "never",
    "new",
    "next",
    "no",
    "none",
    "nor",
    "not",
    "note",
    "nothing",
    "now",
    "of",
    "off",
    "often",
    "ok",
    "okay",
    "on",
    "once",
    "one",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "out",
    "over",
    "per",
    "perhaps",
    "please",
    "remember",
    "same",
    "see",
    "she",
    "should",
    "since",
    "so",
    "some",
    "someone",
    "something",
    "sometimes",
    "soon",
    "still",
    "such",
    "sure",
    "tell",
    "than",
    "thank",
    "thanks",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "though",
    "through",
    "thus",
    "to",
    "today",
    "todo",
    "tomorrow",
    "tonight",
    "too",
    "two",
    "three",
    "under",
    "until",
    "up",
    "us",
    "use",
    "used",
    "usually",
    "very",
    "was",
    "we",
    "well",
    "were",
    "what",
    "whatever",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "without",
    "would",
    "yes",
    "yesterday",
    "yet",
    "you",
    "your",
    "yours",
    "morning",
    "evening",
    "afternoon",
    "night",
    "week",
    "weekend",
    "month",
    "year",
    "update",
    "fyi",
    "fix",
    "fixed",
    "added",
    "removed",
    "deploy",
    "deployed",
    "deploying",
    "meeting",
    "team",
    "decided",
    "agreed",
    "reminder",
    "important",
    "warning",
    "error",
    "done",
    "started",
    "finished",
    "moved",
    "changed",
    "switched",
    "user",
    "users",
    "customer",
    "customers",
    // imperatives that open a note ("Upgrade PostgreSQL ...", "Ping Vera")
    "add",
    "book",
    "buy",
    "cancel",
    "change",
    "close",
    "contact",
    "create",
    "delete",
    "email",
    "install",
    "merge",
    "move",
    "open",
    "ping",
    "read",
    "release",
    "remove",
    "restart",
    "review",
    "run",
    "schedule",
    "send",
    "set",
    "share",
    "ship",
    "switch",
    "test",
    "try",
    "turn",
    "upgrade",
    "write",
    "incident",
    "ticket",
    "issue",
    "bug",
    // labels and nouns that open a note or a ticket ("Decision: ...",
    // "Owner: Priya", "Repro attached")
    "decision",
    "follow-up",
    "followup",
    "integration",
    "repro",
    "request",
    "vendor",
    "owner",
    "prefers",
    "sign",
    "high",
    "low",
    "status",
    "title",
    "steps",
    "expected",
    "actual",
    "summary",
    "action",
    "sponsor",
    "architecture",
    "security",
    "retro",
    "kickoff",
    "alert",
    "backup",
    "task",
    "feature",
    "badge",
    "nightly",
    "weekly",
    "monthly",
    "notes",
    "context",
    "plan",
    "goal",
    "result",
    "results",
];

/// Nationalities and languages: capitalised adjectives, not names ("the new Thai place").
const DEMONYMS: &[&str] = &[
    "american",
    "arabic",
    "asian",
    "australian",
    "austrian",
    "belgian",
    "brazilian",
    "british",
    "canadian",
    "chinese",
    "danish",
    "dutch",
    "english",
    "european",
    "finnish",
    "french",
    "german",
    "greek",
    "indian",
    "irish",
    "italian",
    "japanese",
    "korean",
    "latin",
    "mexican",
    "norwegian",
    "polish",
    "portuguese",
    "russian",
    "scottish",
    "spanish",
    "swedish",
    "swiss",
    "thai",
    "turkish",
    "ukrainian",
    "vietnamese",
    "african",
];

/// Never a name, even capitalised mid-sentence (besides weekday and month
/// names, crate::time_window's).
const TIME_WORDS: &[&str] = &[
    "mon",
    "tue",
    "wed",
    "thu",
    "fri",
    "sat",
    "sun",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "christmas",
    "easter",
    "q1",
    "q2",
    "q3",
    "q4",
    "am",
    "pm",
    "utc",
    "gmt",
    "cet",
    "est",
    "pst",
    "i",
    "ok",
];

/// Words that join capitalised words into one name: "Bank of Lyon", "Ben & Jerry".
const CONNECTORS: &[&str] = &[
    "of", "de", "del", "della", "da", "du", "van", "von", "der", "den", "la", "le", "&",
];

const ORG_WORDS: &[&str] = &[
    "inc",
    "corp",
    "corporation",
    "ltd",
    "llc",
    "gmbh",
    "sa",
    "sas",
    "ag",
    "plc",
    "co",
    "company",
    "bank",
    "university",
    "college",
    "school",
    "institute",
    "labs",
    "lab",
    "foundation",
    "group",
    "agency",
    "ministry",
    "department",
    "council",
    "association",
    "society",
    "hospital",
    "clinic",
    "studio",
    "studios",
    "systems",
    "technologies",
    "software",
    "airlines",
    "partners",
    "capital",
    "ventures",
    "holdings",
    "industries",
    "bureau",
    "logistics",
    "foods",
    "motors",
    "energy",
    "health",
    "media",
    "analytics",
    "networks",
    "robotics",
    "dynamics",
    "consulting",
    "solutions",
    "insurance",
    "pharma",
    "therapeutics",
    "games",
    "entertainment",
    "publishing",
    "airways",
    "shipping",
    "freight",
    "telecom",
    "agency",
];

const PLACE_WORDS: &[&str] = &[
    "street",
    "st",
    "avenue",
    "ave",
    "road",
    "rd",
    "boulevard",
    "square",
    "city",
    "town",
    "village",
    "county",
    "state",
    "island",
    "islands",
    "lake",
    "river",
    "mount",
    "mountains",
    "park",
    "airport",
    "station",
    "bay",
    "beach",
    "valley",
    "hills",
    "coast",
    "province",
    "region",
    "district",
];

/// Prepositions after which a capitalised name is a place ("lives in Lyon").
const PLACE_BEFORE: &[&str] = &[
    "in", "at", "from", "to", "near", "around", "visiting", "visited", "visits", "visit", "via",
];

/// Words after a name that make it a place ("the Berlin office").
const PLACE_AFTER: &[&str] = &[
    "office",
    "offices",
    "branch",
    "campus",
    "hq",
    "headquarters",
    "site",
    "datacenter",
    "region",
    "dc",
    "airport",
];

/// Well-known software and hardware products: a name on this list is a
/// product whatever its neighbours ("moving to Kubernetes", "the Sentry
/// project"), and found in lower case too ("restart redis"), except the
/// ones that are also English words ([`AMBIGUOUS_PRODUCTS`]).
const PRODUCTS: &[&str] = &[
    "postgresql",
    "postgres",
    "mysql",
    "mariadb",
    "sqlite",
    "mongodb",
    "redis",
    "memcached",
    "kafka",
    "rabbitmq",
    "elasticsearch",
    "opensearch",
    "kubernetes",
    "k8s",
    "docker",
    "podman",
    "terraform",
    "ansible",
    "jenkins",
    "grafana",
    "prometheus",
    "datadog",
    "pagerduty",
    "opsgenie",
    "sentry",
    "splunk",
    "kibana",
    "logstash",
    "nginx",
    "haproxy",
    "envoy",
    "istio",
    "consul",
    "vault",
    "github",
    "gitlab",
    "bitbucket",
    "jira",
    "confluence",
    "trello",
    "asana",
    "figma",
    "zoom",
    "salesforce",
    "hubspot",
    "zendesk",
    "intercom",
    "stripe",
    "twilio",
    "sendgrid",
    "mailchimp",
    "shopify",
    "wordpress",
    "heroku",
    "netlify",
    "vercel",
    "cloudflare",
    "fastly",
    "okta",
    "auth0",
    "tableau",
    "looker",
    "metabase",
    "snowflake",
    "bigquery",
    "redshift",
    "databricks",
    "airflow",
    "dbt",
    "spark",
    "hadoop",
    "pytorch",
    "tensorflow",
    "numpy",
    "pandas",
    "django",
    "flask",
    "fastapi",
    "rails",
    "laravel",
    "react",
    "vue",
    "angular",
    "svelte",
    "nextjs",
    "webpack",
    "vite",
    "typescript",
    "javascript",
    "python",
    "golang",
    "rust",
    "java",
    "kotlin",
    "swift",
    "nodejs",
    "npm",
    "yarn",
    "pip",
    "lodash",
    "libvips",
    "ffmpeg",
    "imagemagick",
    "graphql",
    "grpc",
    "iphone",
    "ipad",
    "macbook",
    "thinkpad",
    "android",
    "ios",
    "macos",
    "linux",
    "ubuntu",
    "debian",
    "fedora",
    "centos",
    "windows",
    "chrome",
    "chromium",
    "firefox",
    "edge",
    "vscode",
    "intellij",
    "pycharm",
    "xcode",
    "dropbox",
    "onedrive",
    "sharepoint",
    "gmail",
    "outlook",
    "whatsapp",
    "telegram",
    "signal",
    "discord",
    "teams",
    "notion",
    "linear",
    "slack",
    "safari",
    "sketch",
    "photoshop",
    "illustrator",
    "excel",
    "powerpoint",
    "word",
];

/// Products whose names are common words: only capitalised, mid-sentence.
const AMBIGUOUS_PRODUCTS: &[&str] = &[
    "airflow",
    "angular",
    "ansible",
    "asana",
    "consul",
    "discord",
    "edge",
    "envoy",
    "excel",
    "fedora",
    "flask",
    "java",
    "jenkins",
    "linear",
    "notion",
    "npm",
    "outlook",
    "pandas",
    "pip",
    "python",
    "rails",
    "react",
    "rust",
    "safari",
    "signal",
    "sketch",
    "slack",
    "snowflake",
    "spark",
    "stripe",
    "swift",
    "teams",
    "trello",
    "vault",
    "vue",
    "windows",
    "word",
    "yarn",
    "zoom",
];

/// Common first names from many languages (none an English word): a
/// single capitalised one is a person whatever the preposition before it
/// ("approval from Helen"), and a lower-case one is a name where a person
/// is expected ("ping priya", "jenna from initech").
const FIRST_NAMES: &[&str] = &[
    "aaron",
    "abdul",
    "adam",
    "adrian",
    "ahmed",
    "aiko",
    "aisha",
    "akira",
    "alan",
    "alex",
    "alexander",
    "alexis",
    "ali",
    "alice",
    "alicia",
    "amelia",
    "amir",
    "ana",
    "andrea",
    "andrew",
    "andrei",
    "angela",
    "anika",
    "anna",
    "anne",
    "antonio",
    "anya",
    "arjun",
    "arthur",
    "astrid",
    "ayesha",
    "beatriz",
    "ben",
    "benjamin",
    "bianca",
    "bob",
    "boris",
    "brian",
    "bruno",
    "camila",
    "carla",
    "carlos",
    "carmen",
    "caroline",
    "catherine",
    "charlotte",
    "chen",
    "chloe",
    "chris",
    "christian",
    "clara",
    "claudia",
    "daniel",
    "daniela",
    "dana",
    "david",
    "deepak",
    "diana",
    "diego",
    "dmitri",
    "elena",
    "elif",
    "elias",
    "elizabeth",
    "ella",
    "emily",
    "emma",
    "eric",
    "erik",
    "esther",
    "ethan",
    "eva",
    "fatima",
    "felipe",
    "felix",
    "fernando",
    "finn",
    "francesca",
    "gabriel",
    "giulia",
    "hana",
    "hannah",
    "hans",
    "harry",
    "helen",
    "hiroshi",
    "hugo",
    "ian",
    "ibrahim",
    "igor",
    "ines",
    "ingrid",
    "irene",
    "isabel",
    "isabella",
    "ivan",
    "jack",
    "jakub",
    "james",
    "jan",
    "jane",
    "jason",
    "javier",
    "jenna",
    "jennifer",
    "jessica",
    "jin",
    "joao",
    "johan",
    "john",
    "jonas",
    "jorge",
    "jose",
    "josh",
    "juan",
    "julia",
    "julian",
    "kai",
    "karen",
    "karim",
    "kate",
    "katja",
    "kenji",
    "kevin",
    "kim",
    "kofi",
    "kwame",
    "lara",
    "laura",
    "lea",
    "lena",
    "leo",
    "leon",
    "lin",
    "lina",
    "linda",
    "lisa",
    "lucas",
    "lucia",
    "luis",
    "luka",
    "maya",
    "manuel",
    "marco",
    "marcus",
    "maria",
    "marie",
    "marina",
    "mario",
    "marta",
    "martin",
    "mateo",
    "matteo",
    "mehmet",
    "mei",
    "mia",
    "michael",
    "miguel",
    "mika",
    "mohammed",
    "nadia",
    "naomi",
    "nathan",
    "nina",
    "noah",
    "noor",
    "olga",
    "oliver",
    "olivia",
    "omar",
    "oscar",
    "pablo",
    "paolo",
    "paul",
    "pedro",
    "peter",
    "priya",
    "rafael",
    "rahul",
    "raj",
    "ravi",
    "rebecca",
    "rosa",
    "ryan",
    "sam",
    "samir",
    "sara",
    "sarah",
    "sebastian",
    "sergei",
    "sofia",
    "sophie",
    "stefan",
    "stella",
    "sven",
    "tanaka",
    "thomas",
    "tim",
    "tom",
    "tomas",
    "valentina",
    "vera",
    "victor",
    "viktor",
    "wei",
    "william",
    "xavier",
    "yara",
    "yuki",
    "yusuf",
    "zara",
    "zoe",
];

/// Words around a name that make it a project ("the Apollo project", "Project Apollo").
const PROJECT_WORDS: &[&str] = &[
    "project",
    "projects",
    "initiative",
    "rollout",
    "launch",
    "migration",
    "cutover",
    "pilot",
    "milestone",
    "phase",
    "kickoff",
    "roadmap",
    "workstream",
    "codename",
    "program",
    "programme",
    "epic",
];

/// Words after a single name that make it a person ("Vera said", "Tom's").
const PERSON_AFTER: &[&str] = &[
    "said",
    "says",
    "told",
    "tells",
    "asked",
    "asks",
    "wants",
    "wanted",
    "likes",
    "liked",
    "loves",
    "prefers",
    "drinks",
    "eats",
    "rides",
    "lives",
    "lived",
    "works",
    "worked",
    "thinks",
    "thought",
    "is",
    "was",
    "has",
    "had",
    "will",
    "would",
    "and",
    "called",
    "emailed",
    "wrote",
    "mentioned",
    "joined",
    "left",
    "leads",
    "manages",
    "owns",
    "moved",
    "plays",
    "goes",
    "went",
    "met",
    "needs",
    "uses",
    "reviewed",
    "approved",
    "reports",
    "from",
];

/// Words before a single name that make it a person ("met Vera", "with Tom").
const PERSON_BEFORE: &[&str] = &[
    "met",
    "with",
    "told",
    "asked",
    "ask",
    "call",
    "called",
    "email",
    "emailed",
    "ping",
    "thank",
    "thanks",
    "dear",
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "by",
    "cc",
    "for",
    "and",
    "tell",
    "invite",
    "invited",
    "colleague",
    "manager",
    "boss",
    "wife",
    "husband",
    "son",
    "daughter",
    "friend",
    "brother",
    "sister",
    "mother",
    "father",
    "mom",
    "dad",
    "named",
    "notify",
    "remind",
    "owner",
    "sponsor",
    "contact",
    "partner",
    "hire",
    "engineer",
    "designer",
    "recruiter",
    "teammate",
];

/// Adverbs between a name and the verb that tells what it names.
const ADVERBS: &[&str] = &[
    "now",
    "also",
    "still",
    "never",
    "always",
    "just",
    "really",
    "often",
    "usually",
    "already",
    "finally",
    "again",
    "recently",
    "sometimes",
    "only",
    "actually",
    "no",
    "longer",
];

const TITLES: &[&str] = &["mr", "mrs", "ms", "dr", "prof", "sir", "dame"];

/// A piece of the text: a word, or the punctuation that matters (sentence
/// ends, commas, possessives), with its byte span.
#[derive(Debug, Clone)]
struct Token<'a> {
    text: &'a str,
    start: usize,
    /// First word of a sentence (after the text's start, `.`, `!`, `?`, `:`, a newline or a bullet).
    sentence_start: bool,
    /// Followed directly by `'s` / `’s`.
    possessive: bool,
    /// A URL, email, handle or id stands between it and the word before.
    after_gap: bool,
}

/// The entities of `text` (at most [`MAX_PER_MEMORY`], the first of each
/// key kept, in order of appearance; its first [`MAX_SCANNED_BYTES`] read).
/// Linear in the text: every word is looked at a bounded number of times.
pub fn extract(text: &str) -> Vec<Entity> {
    let mut cut = text.len().min(MAX_SCANNED_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let text = &text[..cut];
    let mut found: Vec<Entity> = Vec::new();
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let push = |found: &mut Vec<Entity>, name: &str, kind: Kind| {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || found.len() >= MAX_PER_MEMORY {
            return;
        }
        let k = key(name);
        if !found.iter().any(|e| e.key == k) {
            found.push(Entity {
                name: name.to_string(),
                key: k,
                kind,
            });
        }
    };
    // 1. Shapes: URLs, emails, handles, ids (their spans are not names).
    for (start, word) in spans(text) {
        let end = start + word.len();
        let trimmed = word.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '}', '"', '\'']);
        let trimmed = trimmed.trim_start_matches(['(', '[', '{', '"', '\'']);
        if trimmed.is_empty() {
            continue;
        }
        let kind = if is_url(trimmed) {
            Some(Kind::Url)
        } else if is_email(trimmed) {
            Some(Kind::Email)
        } else if is_handle(trimmed) {
            Some(Kind::Handle)
        } else if is_id(trimmed) {
            Some(Kind::Id)
        } else {
            None
        };
        if let Some(kind) = kind {
            push(&mut found, trimmed, kind);
            taken.push((start, end));
            continue;
        }
        // `svc=ledger-sync`, `err=ERR_X`, `image-resizer:latest`,
        // `[fraud-scorer]`: the value of a log field, without its tag
        let field = trimmed.contains('=');
        let value = trimmed.rsplit_once('=').map_or(trimmed, |(_, v)| v);
        let value = value.trim_matches(['[', ']', '(', ')', '"', '\'', '`']);
        let value = value.split_once(':').map_or(value, |(name, _)| name);
        let kind = if field && is_id(value) {
            Some(Kind::Id)
        } else if is_region(value) {
            Some(Kind::Place)
        } else if is_service(value) {
            Some(Kind::Service)
        } else {
            None
        };
        if let Some(kind) = kind {
            push(&mut found, value, kind);
            taken.push((start, end));
        }
    }
    // 2. Names: runs of capitalised words.
    let tokens = tokens(text, &taken);
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if !is_capitalised(t.text) || is_time_word(t.text) {
            i += 1;
            continue;
        }
        // a run of capitalised words, with connectors between them
        let mut j = i + 1;
        let mut end = i;
        while j < tokens.len() && !tokens[j].sentence_start && !tokens[j].after_gap && !tokens[j - 1].possessive {
            let w = tokens[j].text;
            if is_capitalised(w) && !is_time_word(w) {
                end = j;
                j += 1;
            } else if CONNECTORS.contains(&w.to_lowercase().as_str())
                && j + 1 < tokens.len()
                && is_capitalised(tokens[j + 1].text)
                && !tokens[j + 1].sentence_start
            {
                j += 1;
            } else {
                break;
            }
        }
        let mut first = i;
        // A sentence's first word is a name only when it is not a common
        // word ("The Apollo project" -> "Apollo"; "Deploy Friday" -> none).
        while first <= end && tokens[first].sentence_start_or_after(first, i) && is_common(tokens[first].text) {
            first += 1;
        }
        // titles stay out of the name ("Dr Vera Lind" -> "Vera Lind", a person)
        let titled = first <= end && TITLES.contains(&tokens[first].text.to_lowercase().trim_end_matches('.'));
        if titled {
            first += 1;
        }
        // common words left at the end of a run ("Vera Today") are not part of it
        while end >= first && is_common(tokens[end].text) && end > first {
            end -= 1;
        }
        if first <= end && !(first == end && is_common(tokens[first].text)) {
            let name = &text[tokens[first].start..tokens[end].start + tokens[end].text.len()];
            let kind = if titled {
                Kind::Person
            } else {
                kind_of(&tokens, first, end)
            };
            // One capitalised word opening a sentence is a name only with a
            // cue of what it names ("Vera rides", "Lyon's") or a verb after
            // it ("Priya reviews", "Omar fixed"): "Ping @vera", "Merge the
            // branch" are verbs themselves.
            let bare_opening =
                first == end && tokens[first].sentence_start && kind == Kind::Thing && !verb_follows(&tokens, end);
            if !bare_opening {
                push(&mut found, name, kind);
            }
        }
        // past the whole run scanned: a long run of capitalised common words
        // ("The The The ...") is looked at once, not once per word
        i = j.max(end + 1).max(i + 1);
    }
    // 3. Names written in lower case, as people type them in a chat: a
    // product whose name is no English word ("restart redis"), a first
    // name where a person is expected ("ping priya", "marcus shared").
    for (i, t) in tokens.iter().enumerate() {
        if !t.text.chars().all(|c| c.is_lowercase() || c.is_ascii_digit()) {
            continue;
        }
        let before = (i > 0 && !t.sentence_start && !t.after_gap).then(|| tokens[i - 1].text.to_lowercase());
        let after = tokens
            .get(i + 1)
            .filter(|n| !n.sentence_start && !n.after_gap)
            .map(|n| n.text.to_lowercase());
        if PRODUCTS.contains(&t.text) && !AMBIGUOUS_PRODUCTS.contains(&t.text) {
            push(&mut found, t.text, Kind::Product);
        } else if FIRST_NAMES.contains(&t.text)
            && (before.as_deref().is_some_and(|w| PERSON_BEFORE.contains(&w))
                || after
                    .as_deref()
                    .is_some_and(|w| PERSON_AFTER.contains(&w) || w == "shared"))
        {
            push(&mut found, t.text, Kind::Person);
        }
    }
    found
}

/// A name on the product list (capitalised or not: the caller knows).
fn is_product(lower: &str) -> bool {
    PRODUCTS.contains(&lower)
}

impl Token<'_> {
    /// Whether token `at` of a run starting at `run_start` is still at the
    /// sentence's start (the run's first word, at a sentence start).
    fn sentence_start_or_after(&self, at: usize, run_start: usize) -> bool {
        at == run_start && self.sentence_start
    }
}

/// The entities a memory's tags name by hand: `entity:NAME` (kind `thing`,
/// or `entity:KIND:NAME` with one of the kinds).
pub fn from_tags<S: AsRef<str>>(tags: &[S]) -> Vec<Entity> {
    let mut out: Vec<Entity> = Vec::new();
    for tag in tags {
        let Some(rest) = tag.as_ref().strip_prefix("entity:") else {
            continue;
        };
        let (kind, name) = match rest.split_once(':') {
            Some((k, n)) if Kind::parse(k).is_some() => (Kind::parse(k).unwrap_or(Kind::Thing), n),
            _ => (Kind::Thing, rest),
        };
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            continue;
        }
        let k = key(name);
        if !out.iter().any(|e| e.key == k) {
            out.push(Entity {
                name: name.to_string(),
                key: k,
                kind,
            });
        }
    }
    out
}

/// A memory's entities: those its tags name, then those of its content
/// (a tag's kind wins over the rules'), at most [`MAX_PER_MEMORY`].
pub fn of_memory<S: AsRef<str>>(content: &str, tags: &[S]) -> Vec<Entity> {
    let mut all = from_tags(tags);
    all.truncate(MAX_PER_MEMORY);
    for e in extract(content) {
        if all.len() >= MAX_PER_MEMORY {
            break;
        }
        if !all.iter().any(|a| a.key == e.key) {
            all.push(e);
        }
    }
    all
}

/// Whitespace-separated words with their byte offsets.
fn spans(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split_whitespace()
        .map(move |w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
}

/// Words (letters, digits, `-`, `.` inside a word, `&`) outside the taken
/// spans, each knowing whether it starts a sentence.
fn tokens<'a>(text: &'a str, taken: &[(usize, usize)]) -> Vec<Token<'a>> {
    let mut out: Vec<Token<'a>> = Vec::new();
    let mut sentence_start = true;
    let mut gap = false;
    let mut next_taken = 0;
    let bytes: Vec<(usize, char)> = text.char_indices().collect();
    let mut k = 0;
    while k < bytes.len() {
        let (pos, c) = bytes[k];
        // `taken` is in text order: step through it with the scan
        while next_taken < taken.len() && taken[next_taken].1 <= pos {
            next_taken += 1;
        }
        if let Some(&(_, end)) = taken.get(next_taken).filter(|(s, e)| pos >= *s && pos < *e) {
            // a URL, email, handle or id: skip it; it does not end a sentence
            while k < bytes.len() && bytes[k].0 < end {
                k += 1;
            }
            gap = true;
            continue;
        }
        if c.is_alphanumeric() || c == '&' {
            let start = pos;
            let mut e = k;
            while e < bytes.len() {
                let (_, ch) = bytes[e];
                let inner = (ch == '-' || ch == '.' || ch == '\'' || ch == '’')
                    && e + 1 < bytes.len()
                    && bytes[e + 1].1.is_alphanumeric()
                    && !(matches!(ch, '\'' | '’') && matches!(bytes[e + 1].1, 's' | 'S') && ends_word(&bytes, e + 2));
                if ch.is_alphanumeric() || (ch == '&' && e == k) || inner {
                    e += 1;
                } else {
                    break;
                }
            }
            let end = if e < bytes.len() { bytes[e].0 } else { text.len() };
            let word = &text[start..end];
            let possessive = e + 1 < bytes.len()
                && matches!(bytes[e].1, '\'' | '’')
                && matches!(bytes[e + 1].1, 's' | 'S')
                && ends_word(&bytes, e + 2);
            out.push(Token {
                text: word.trim_end_matches('.'),
                start,
                sentence_start,
                possessive,
                after_gap: gap,
            });
            gap = false;
            sentence_start = word.ends_with('.') && word.len() > 2 && !is_abbreviation(word);
            k = if possessive { e + 2 } else { e };
            continue;
        }
        if matches!(
            c,
            '.' | '!' | '?' | ':' | ';' | '\n' | '•' | '*' | '|' | '(' | ')' | '"' | '“' | '”'
        ) {
            // "Dr. Lind" keeps its sentence going
            let after_title = c == '.'
                && out
                    .last()
                    .is_some_and(|t| TITLES.contains(&t.text.to_lowercase().as_str()) && t.start + t.text.len() == pos);
            if !after_title {
                sentence_start = true;
            }
        } else if c == '-' && (k == 0 || bytes[k - 1].1 == '\n' || bytes[k - 1].1 == ' ') {
            // a bullet ("- Vera ...") or a dash between clauses
            sentence_start = sentence_start || k == 0 || bytes[k - 1].1 == '\n';
        }
        k += 1;
    }
    out
}

fn ends_word(bytes: &[(usize, char)], at: usize) -> bool {
    at >= bytes.len() || !bytes[at].1.is_alphanumeric()
}

fn is_abbreviation(word: &str) -> bool {
    let w = word.trim_end_matches('.').to_lowercase();
    TITLES.contains(&w.as_str()) || matches!(w.as_str(), "e.g" | "i.e" | "etc" | "vs" | "st" | "no")
}

/// Starts with a capital letter and is not all digits ("Vera", "PostgreSQL", "iPhone").
fn is_capitalised(w: &str) -> bool {
    let mut chars = w.chars();
    match chars.next() {
        Some(c) if c.is_uppercase() => true,
        // "iPhone", "eBay": a lower-case letter before an inner capital
        Some(c) if c.is_lowercase() => {
            let rest: Vec<char> = chars.collect();
            rest.first().is_some_and(|n| n.is_uppercase()) && rest.iter().any(|c| c.is_lowercase())
        }
        _ => false,
    }
}

fn is_common(w: &str) -> bool {
    let l = w.to_lowercase();
    COMMON.contains(&l.as_str()) || is_time_word(w)
}

/// Weekdays, months and the like ("Mondays" too), nationalities, and short
/// all-capital acronyms (`CI`, `DNS`, `CSV`: terms, not named things; ids
/// with digits are found by their shape).
fn is_time_word(w: &str) -> bool {
    let l = w.to_lowercase();
    let singular = l.strip_suffix('s').unwrap_or(&l);
    [l.as_str(), singular].iter().any(|w| {
        TIME_WORDS.contains(w) || crate::time_window::MONTHS.contains(w) || crate::time_window::weekday(w).is_some()
    }) || DEMONYMS.contains(&l.as_str())
        || is_all_capitals(w)
}

/// Acronyms and shouted words ("CI", "SLAs", "CRITICAL", "DEBUG"): terms
/// and log levels, not names; ids with digits are found by their shape.
fn is_all_capitals(w: &str) -> bool {
    let w = w.strip_suffix('s').filter(|r| r.chars().count() >= 2).unwrap_or(w);
    w.chars().all(|c| c.is_ascii_uppercase())
}

fn lower(tokens: &[Token], i: usize) -> Option<String> {
    tokens.get(i).map(|t| t.text.to_lowercase())
}

/// The kind of the name made of tokens `first..=end`.
fn kind_of(tokens: &[Token], first: usize, end: usize) -> Kind {
    let words: Vec<String> = tokens[first..=end].iter().map(|t| t.text.to_lowercase()).collect();
    let before = if first > 0 && !tokens[first].sentence_start && !tokens[first].after_gap {
        lower(tokens, first - 1)
    } else {
        None
    };
    let before2 = if first > 1
        && !tokens[first].sentence_start
        && !tokens[first].after_gap
        && !tokens[first - 1].sentence_start
    {
        lower(tokens, first - 2)
    } else {
        None
    };
    // the word after, past adverbs ("Vera now drinks", "Tom also said")
    let mut next = end + 1;
    while tokens
        .get(next)
        .is_some_and(|t| !t.sentence_start && !t.after_gap && ADVERBS.contains(&t.text.to_lowercase().as_str()))
    {
        next += 1;
    }
    let after = if tokens.get(next).is_some_and(|t| !t.sentence_start && !t.after_gap) {
        lower(tokens, next)
    } else {
        None
    };
    let last = words.last().map(String::as_str).unwrap_or_default();
    if is_product(&words[0]) {
        return Kind::Product;
    }
    // "Acme Corp", "Bank of Lyon", "University of Lyon"
    if ORG_WORDS.contains(&last) || (words.len() > 2 && ORG_WORDS.contains(&words[0].as_str())) {
        return Kind::Organization;
    }
    if PLACE_WORDS.contains(&last) || (words.len() > 1 && PLACE_WORDS.contains(&words[0].as_str())) {
        return Kind::Place;
    }
    if words.first().is_some_and(|w| PROJECT_WORDS.contains(&w.as_str()))
        || after.as_deref().is_some_and(|w| PROJECT_WORDS.contains(&w))
        || before.as_deref().is_some_and(|w| PROJECT_WORDS.contains(&w))
    {
        return Kind::Project;
    }
    if words.len() == 1 && FIRST_NAMES.contains(&words[0].as_str()) {
        return Kind::Person;
    }
    let inner_capital = tokens[first..=end].iter().any(|t| {
        let cs: Vec<char> = t.text.chars().collect();
        cs.windows(2).any(|p| p[0].is_lowercase() && p[1].is_uppercase())
    });
    let versioned = after.as_deref().is_some_and(|w| {
        w.chars().next().is_some_and(|c| c.is_ascii_digit())
            || (w.starts_with('v') && w[1..].starts_with(|c: char| c.is_ascii_digit()))
    });
    if inner_capital || versioned {
        return Kind::Product;
    }
    if after.as_deref().is_some_and(|w| PLACE_AFTER.contains(&w)) {
        return Kind::Place;
    }
    if before.as_deref().is_some_and(|w| PLACE_BEFORE.contains(&w))
        && !before2
            .as_deref()
            .is_some_and(|w| matches!(w, "talked" | "spoke" | "went" | "lunch" | "dinner"))
        && !tokens[end].possessive
    {
        // "works at Acme" is an organisation more often than a place, but
        // without a cue the rules cannot tell: a place.
        return Kind::Place;
    }
    if tokens[end].possessive
        || words.len() == 2
            && !tokens[first..=end]
                .iter()
                .any(|t| t.text.chars().all(|c| c.is_uppercase()))
        || after.as_deref().is_some_and(|w| PERSON_AFTER.contains(&w))
        || before.as_deref().is_some_and(|w| PERSON_BEFORE.contains(&w))
    {
        return Kind::Person;
    }
    Kind::Thing
}

/// Whether the word after token `end` (past adverbs) has a verb's shape: a
/// third-person -s ("reviews", not "class") or a past -ed ("visited").
fn verb_follows(tokens: &[Token], end: usize) -> bool {
    let mut next = end + 1;
    while tokens
        .get(next)
        .is_some_and(|t| ADVERBS.contains(&t.text.to_lowercase().as_str()))
    {
        next += 1;
    }
    tokens.get(next).is_some_and(|t| {
        let w = t.text;
        !t.sentence_start
            && !t.after_gap
            && w.len() >= 4
            && w.chars().all(|c| c.is_lowercase())
            && ((w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us")) || w.ends_with("ed"))
    })
}

/// Cloud regions: `eu-west-1`, `ap-southeast-2` (AWS, Azure's short
/// names), `europe-west1`, `us-central1` (Google Cloud).
fn is_region(w: &str) -> bool {
    const AREAS: &[&str] = &[
        "us",
        "eu",
        "ap",
        "sa",
        "ca",
        "me",
        "af",
        "il",
        "mx",
        "europe",
        "asia",
        "australia",
        "northamerica",
        "southamerica",
        "africa",
    ];
    const DIRECTIONS: &[&str] = &[
        "east",
        "west",
        "north",
        "south",
        "central",
        "northeast",
        "southeast",
        "northwest",
        "southwest",
    ];
    let parts: Vec<&str> = w.split('-').collect();
    match parts.as_slice() {
        [area, dir, n] => {
            AREAS.contains(area) && DIRECTIONS.contains(dir) && !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())
        }
        [area, dir_n] => {
            let dir = dir_n.trim_end_matches(|c: char| c.is_ascii_digit());
            AREAS.contains(area) && dir.len() < dir_n.len() && DIRECTIONS.contains(&dir)
        }
        _ => false,
    }
}

/// Words a service's name is made of ("billing-api", "auth-service",
/// "payments_worker", "web-frontend"): one of them, or an agent noun
/// ("image-resizer", "fraud-scorer", "dns-resolver").
const SERVICE_PARTS: &[&str] = &[
    "api",
    "apis",
    "service",
    "svc",
    "gateway",
    "gw",
    "worker",
    "workers",
    "bot",
    "sync",
    "frontend",
    "backend",
    "web",
    "ui",
    "app",
    "proxy",
    "queue",
    "cron",
    "job",
    "jobs",
    "export",
    "import",
    "ingest",
    "pipeline",
    "cache",
    "db",
    "server",
    "daemon",
    "engine",
    "store",
    "auth",
    "agent",
    "lambda",
    "function",
    "svc",
    "cluster",
    "etl",
    "batch",
    "stream",
    "feed",
    "hub",
    "portal",
    "console",
    "dashboard",
    "admin",
    "core",
];

/// Endings of an environment or a tenant, not of a service ("acme-prod").
const ENVIRONMENT_PARTS: &[&str] = &[
    "prod",
    "production",
    "staging",
    "stage",
    "dev",
    "test",
    "qa",
    "sandbox",
    "preview",
    "canary",
    "latest",
    "local",
];

/// A service's name: two to four parts of letters and digits joined by
/// `-` or `_`, not all capitals (`ERR_TIMEOUT` is an id), one of them a
/// service word or an agent noun, none an environment.
fn is_service(w: &str) -> bool {
    if !w.contains(['-', '_']) || w.chars().all(|c| !c.is_lowercase()) {
        return false;
    }
    let parts: Vec<String> = w.split(['-', '_']).map(str::to_lowercase).collect();
    if !(2..=4).contains(&parts.len())
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_alphanumeric()))
        || !parts[0].starts_with(|c: char| c.is_ascii_alphabetic())
        || parts.iter().any(|p| ENVIRONMENT_PARTS.contains(&p.as_str()))
    {
        return false;
    }
    parts.iter().any(|p| {
        SERVICE_PARTS.contains(&p.as_str())
            || (p.len() >= 6 && (p.ends_with("er") || p.ends_with("or")) && !COMMON.contains(&p.as_str()))
    })
}

fn is_url(w: &str) -> bool {
    (w.starts_with("https://") || w.starts_with("http://")) && w.len() > 10
        || w.starts_with("www.") && w[4..].contains('.') && w.len() > 8
}

fn is_email(w: &str) -> bool {
    let Some((local, domain)) = w.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.chars().all(|c| c.is_alphanumeric() || "._%+-".contains(c))
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && domain.chars().all(|c| c.is_alphanumeric() || ".-".contains(c))
}

fn is_handle(w: &str) -> bool {
    let Some(rest) = w.strip_prefix('@') else { return false };
    rest.chars().count() >= 2
        && rest
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
        && rest.chars().next().is_some_and(char::is_alphanumeric)
}

/// Ticket and error codes: `OPS-4521`, `JIRA-12`, `ERR_CONN_RESET`,
/// `E1203`, `#4521`, `INC0012345`, `CVE-2024-3094`.
fn is_id(w: &str) -> bool {
    let w = w.trim_end_matches(['.', ',']);
    if let Some(n) = w.strip_prefix('#') {
        return n.len() >= 2 && n.chars().all(|c| c.is_ascii_digit());
    }
    let has_digit = w.chars().any(|c| c.is_ascii_digit());
    let letters_upper = w.chars().filter(|c| c.is_alphabetic()).all(|c| c.is_uppercase());
    let letters = w.chars().filter(|c| c.is_alphabetic()).count();
    if !w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') || letters == 0 {
        return false;
    }
    // PREFIX-123, ABC-12-x: capitals, a dash, digits
    if let Some((prefix, rest)) = w.split_once('-') {
        if prefix.len() >= 2
            && prefix.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && rest.starts_with(|c: char| c.is_ascii_digit())
        {
            return true;
        }
    }
    // ERR_CONN_RESET, E_TIMEOUT: capitals joined by underscores
    if w.contains('_') && letters_upper && letters >= 3 && !w.starts_with('_') {
        return true;
    }
    // E1203, INC0012345: capitals then at least three digits
    let split = w.find(|c: char| c.is_ascii_digit()).unwrap_or(w.len());
    has_digit
        && letters_upper
        && split >= 1
        && w[..split].chars().all(|c| c.is_ascii_uppercase())
        && w[split..].len() >= 3
        && w[split..].chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<(String, &'static str)> {
        extract(text).into_iter().map(|e| (e.name, e.kind.name())).collect()
    }

    fn n(pairs: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
        pairs.iter().map(|(a, b)| (a.to_string(), *b)).collect()
    }

    #[test]
    fn keys_ignore_case_and_accents() {
        assert_eq!(key("José"), "jose");
        assert_eq!(key("JOSE"), "jose");
        assert_eq!(key("  José   Díaz "), "jose diaz");
        assert_eq!(key("Zoë Straße"), "zoe strasse");
        assert_eq!(key("Ægir"), "aegir");
    }

    #[test]
    fn people_places_and_organisations() {
        assert_eq!(names("Vera rides a blue bicycle to work"), n(&[("Vera", "person")]));
        assert_eq!(
            names("Alice moved to Berlin in March to join Acme Corp."),
            n(&[("Alice", "person"), ("Berlin", "place"), ("Acme Corp", "organization")])
        );
        assert_eq!(
            names("Had lunch with Tom Baker at the office"),
            n(&[("Tom Baker", "person")])
        );
        assert_eq!(
            names("The Bank of Lyon approved the loan"),
            n(&[("Bank of Lyon", "organization")])
        );
        assert_eq!(names("Dr. Lind reviewed the scan"), n(&[("Lind", "person")]));
    }

    #[test]
    fn sentence_starts_and_common_words_are_not_names() {
        assert!(names("The deploy failed again. Yesterday it worked.").is_empty());
        assert!(names("Deploy on Friday after the standup.").is_empty());
        assert!(names("Remember to water the plants. Maybe tomorrow.").is_empty());
        assert_eq!(names("Yesterday Vera said the tea was cold"), n(&[("Vera", "person")]));
        assert!(names("I may go there in May").is_empty());
    }

    #[test]
    fn projects_products_and_shapes() {
        assert_eq!(names("The Apollo project ships in June"), n(&[("Apollo", "project")]));
        assert_eq!(
            names("We upgraded PostgreSQL to 16 last week"),
            n(&[("PostgreSQL", "product")])
        );
        assert_eq!(
            names("Ping @vera_l or mail vera@example.com about OPS-4521, see https://tracker.example.com/OPS-4521"),
            n(&[
                ("@vera_l", "handle"),
                ("vera@example.com", "email"),
                ("OPS-4521", "id"),
                ("https://tracker.example.com/OPS-4521", "url"),
            ])
        );
        assert_eq!(
            names("The job died with ERR_CONN_RESET and E1203"),
            n(&[("ERR_CONN_RESET", "id"), ("E1203", "id")])
        );
    }

    #[test]
    fn tags_name_entities_by_hand() {
        let tags = ["drinks", "entity:Gyokuro", "entity:product:Kettle Pro", "entity: "];
        let got: Vec<(String, &str)> = from_tags(&tags).into_iter().map(|e| (e.name, e.kind.name())).collect();
        assert_eq!(got, n(&[("Gyokuro", "thing"), ("Kettle Pro", "product")]));
        let all = of_memory("Vera likes Gyokuro", &["entity:person:vera"]);
        assert_eq!(
            all.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
            vec!["vera", "gyokuro"]
        );
        assert_eq!(all[0].kind, Kind::Person);
    }

    #[test]
    fn long_texts_are_read_in_one_pass() {
        // Runs of capitalised common words, shapes and names, 256 KiB each
        // (the content limit). Before the one-pass scan, "The The ..." took
        // minutes: every word restarted the run. Only the first 16 KiB count.
        for unit in ["The ", "#12 ", "Vera Lind ", "OPS-1 @a x@y.io "] {
            let text = unit.repeat(256 * 1024 / unit.len());
            assert!(extract(&text).len() <= MAX_PER_MEMORY);
        }
        let late = format!("{}Vera Lind", "x ".repeat(MAX_SCANNED_BYTES));
        assert!(extract(&late).is_empty(), "past the scanned start");
        let tags: Vec<String> = (0..100).map(|i| format!("entity:thing {i}")).collect();
        assert_eq!(of_memory("", &tags).len(), MAX_PER_MEMORY);
    }

    #[test]
    fn limits_hold() {
        let many: String = (0..100).map(|i| format!("Met Person{i} Smith. ")).collect();
        assert!(extract(&many).len() <= MAX_PER_MEMORY);
        let long = format!("Met {}", "Abc ".repeat(60));
        assert!(extract(&long).iter().all(|e| e.name.chars().count() <= MAX_NAME_CHARS));
    }
}

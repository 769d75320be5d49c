//! General invalid traffic (MRC IVT guidelines): which requests are not a person's
//! browser or player, decided from request headers alone (no IP is read or kept).
//!
//! Inputs ([`AgentHeaders`], all borrowed, absent = `None`):
//! - `User-Agent`, and `X-Device-User-Agent`: server-side ad insertion fires tracking
//!   from its servers on the player's behalf and forwards the device's agent in that
//!   header (IAB guidance), so when it is present the device's agent is the one
//!   classified and the request is marked server-side;
//! - `Sec-Purpose` (`prefetch`, `prefetch;prerender`), `Purpose` (`prefetch`),
//!   `X-Purpose` (`preview`, Safari's top sites) and `X-Moz` (`prefetch`, Firefox): a
//!   request the browser made ahead of, or without, a person looking.
//!
//! The agent's class ([`AgentClass`], the record's `agent` field):
//! - `non_browser`: an HTTP library or command-line client ([`NON_BROWSER_PREFIXES`],
//!   the one list kept here, checked first so that these are told apart from crawlers;
//!   the bot list below also names several of them);
//! - `known_bot`: matches a pattern of the maintained
//!   [`crawler-user-agents`](https://github.com/monperrus/crawler-user-agents) data set
//!   (MIT; version, source and the refresh script in `schemas/data/README.md`): about
//!   1,500 regular expressions for crawlers and spiders (Googlebot, bingbot, AhrefsBot,
//!   GPTBot, ...), headless browsers, uptime monitors, feed readers and link
//!   previewers, each with example agents, which the tests check all classify as bots.
//!   Compiled into one regular expression, matched case-sensitively as the data set's
//!   own validation does;
//! - `missing`: no agent, an empty one, or one that is not UTF-8: invalid for the
//!   same reason as `non_browser` (a browser always sends one);
//! - `browser`: anything else, including in-app players (`AppleCoreMedia`, `Dalvik`,
//!   ExoPlayer), which are a person's device.
//!
//! An event is valid or has one invalid reason ([`InvalidReason`], the first that
//! applies, in the order known bot, non-browser, prefetch, unverified ad id).
//! Everything here is pure; the bot patterns compile once, on first use ([`warm`]).

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::ad_id::UnverifiedAdId;

/// The user agent's class, as the edge records it in the `agent` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentClass {
    /// A person's browser or player.
    Browser,
    /// A crawler, spider, headless browser or monitor on the bot list.
    KnownBot,
    /// An HTTP library or command-line client.
    NonBrowser,
    /// No user agent.
    Missing,
}

impl AgentClass {
    /// Every class.
    pub const ALL: [AgentClass; 4] = [
        Self::Browser,
        Self::KnownBot,
        Self::NonBrowser,
        Self::Missing,
    ];

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Browser => "browser",
            Self::KnownBot => "known_bot",
            Self::NonBrowser => "non_browser",
            Self::Missing => "missing",
        }
    }
}

/// Why an event is invalid traffic (bounded: also the `reason` metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidReason {
    /// The agent is a known bot or spider.
    KnownBot,
    /// The agent is an HTTP library or command-line client, or missing.
    NonBrowser,
    /// A prefetch, prerender or preview, not a person's view.
    Prefetch,
    /// The `adId` did not verify (the record's `adIdVerdict`).
    UnverifiedAdId,
}

impl InvalidReason {
    /// Every reason, in the order they are decided.
    pub const ALL: [InvalidReason; 4] = [
        Self::KnownBot,
        Self::NonBrowser,
        Self::Prefetch,
        Self::UnverifiedAdId,
    ];

    /// The wire name and metric label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::KnownBot => "known_bot",
            Self::NonBrowser => "non_browser",
            Self::Prefetch => "prefetch",
            Self::UnverifiedAdId => "unverified_ad_id",
        }
    }
}

/// The request headers classification reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentHeaders<'a> {
    /// `User-Agent`.
    pub user_agent: Option<&'a str>,
    /// `X-Device-User-Agent` (server-side ad insertion).
    pub device_user_agent: Option<&'a str>,
    /// `Sec-Purpose`.
    pub sec_purpose: Option<&'a str>,
    /// `Purpose`.
    pub purpose: Option<&'a str>,
    /// `X-Purpose`.
    pub x_purpose: Option<&'a str>,
    /// `X-Moz`.
    pub x_moz: Option<&'a str>,
}

/// What the edge records about a request's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    /// The class of the agent classified (the device's when server-side).
    pub agent: AgentClass,
    /// Fired by a server on the device's behalf (`X-Device-User-Agent` present).
    pub server_side: bool,
    /// A prefetch, prerender or preview.
    pub prefetch: bool,
}

impl Traffic {
    /// A person's browser, not server-side, not a prefetch.
    pub const BROWSER: Traffic = Traffic {
        agent: AgentClass::Browser,
        server_side: false,
        prefetch: false,
    };

    /// The invalid reason of an event with this traffic and ad id verdict.
    pub fn invalid_reason(self, ad_id: Option<UnverifiedAdId>) -> Option<InvalidReason> {
        invalid_reason(Some(self.agent), self.prefetch, ad_id)
    }
}

/// Agents of HTTP libraries and command-line clients, matched as an ASCII
/// case-insensitive prefix. Crawlers are not listed here (they come from the data set);
/// these are told apart because a script is not a crawler. `Python/` covers
/// `aiohttp` (`Python/3.12 aiohttp/3.9`).
pub const NON_BROWSER_PREFIXES: &[&str] = &[
    "curl/",
    "Wget/",
    "python-requests/",
    "Python-urllib/",
    "python-httpx/",
    "Python/",
    "Go-http-client/",
    "Java/",
    "Apache-HttpClient/",
    "okhttp/",
    "libwww-perl/",
    "axios/",
    "node-fetch",
    "undici",
    "PostmanRuntime/",
    "HTTPie/",
];

/// The data set's patterns, one per line (`schemas/data/crawler-user-agents.txt`).
pub const BOT_PATTERNS: &str = include_str!("../data/crawler-user-agents.txt");

/// All of [`BOT_PATTERNS`] as one regular expression (each pattern a group of an
/// alternation; the set is pinned, so a pattern that does not compile is a bug the
/// tests catch, and then no agent is called a bot rather than the edge failing).
static BOTS: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
    let alternation = BOT_PATTERNS
        .lines()
        .filter(|l| !l.is_empty())
        .map(|p| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|");
    regex::RegexBuilder::new(&alternation)
        .size_limit(64 << 20)
        .dfa_size_limit(16 << 20)
        .build()
        .ok()
});

fn is_bot(ua: &str) -> bool {
    BOTS.as_ref().is_some_and(|r| r.is_match(ua))
}

/// Compiles the bot patterns now rather than on the first request.
pub fn warm() {
    LazyLock::force(&BOTS);
}

/// Classifies a request from its headers.
pub fn classify(h: &AgentHeaders<'_>) -> Traffic {
    let device = h.device_user_agent.filter(|d| !d.trim().is_empty());
    let agent = classify_agent(device.or(h.user_agent));
    let prefetch = [h.sec_purpose, h.purpose, h.x_purpose, h.x_moz]
        .into_iter()
        .flatten()
        .any(is_prefetch);
    Traffic {
        agent,
        server_side: device.is_some(),
        prefetch,
    }
}

/// The class of one user agent (`None`: the header is absent).
pub fn classify_agent(user_agent: Option<&str>) -> AgentClass {
    let ua = match user_agent.map(str::trim) {
        None | Some("") => return AgentClass::Missing,
        Some(ua) => ua,
    };
    if is_non_browser(ua) {
        AgentClass::NonBrowser
    } else if is_bot(ua) {
        AgentClass::KnownBot
    } else {
        AgentClass::Browser
    }
}

/// Whether the agent starts with one of [`NON_BROWSER_PREFIXES`].
pub fn is_non_browser(ua: &str) -> bool {
    NON_BROWSER_PREFIXES.iter().any(|p| {
        ua.as_bytes()
            .get(..p.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(p.as_bytes()))
    })
}

/// Whether a purpose header's value names a prefetch, prerender or preview (tokens
/// separated by `;`, `,` or spaces, compared ASCII case-insensitively).
pub fn is_prefetch(value: &str) -> bool {
    value
        .split([';', ',', ' ', '\t'])
        .map(|t| t.split('=').next().unwrap_or(t).trim())
        .any(|t| {
            ["prefetch", "prerender", "preview"]
                .iter()
                .any(|p| t.eq_ignore_ascii_case(p))
        })
}

/// The invalid reason of an event, the first that applies: known bot, non-browser
/// (or missing agent), prefetch, unverified ad id. `agent: None` is a record written
/// before the edge classified agents, read as a browser.
pub fn invalid_reason(
    agent: Option<AgentClass>,
    prefetch: bool,
    ad_id: Option<UnverifiedAdId>,
) -> Option<InvalidReason> {
    match agent {
        Some(AgentClass::KnownBot) => Some(InvalidReason::KnownBot),
        Some(AgentClass::NonBrowser | AgentClass::Missing) => Some(InvalidReason::NonBrowser),
        Some(AgentClass::Browser) | None if prefetch => Some(InvalidReason::Prefetch),
        Some(AgentClass::Browser) | None => ad_id.map(|_| InvalidReason::UnverifiedAdId),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 \
        (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

    fn ua(ua: &str) -> AgentHeaders<'_> {
        AgentHeaders {
            user_agent: Some(ua),
            ..AgentHeaders::default()
        }
    }

    #[test]
    fn browsers_and_players_are_browsers() {
        for b in [
            CHROME,
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 \
             (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
             Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
            "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) \
             SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36",
            "Mozilla/5.0 (Linux; Android 4.2.1; CUBOT GT99 Build/JOP40D) AppleWebKit/535.19 \
             (KHTML, like Gecko) Chrome/18.0.1025.166 Mobile Safari/535.19",
            "AppleCoreMedia/1.0.0.21F79 (iPhone; U; CPU OS 17_5 like Mac OS X; en_us)",
            "Dalvik/2.1.0 (Linux; U; Android 14; Pixel 8 Build/AP2A.240805.005)",
        ] {
            assert_eq!(classify(&ua(b)), Traffic::BROWSER, "{b}");
            assert_eq!(Traffic::BROWSER.invalid_reason(None), None);
        }
    }

    #[test]
    fn every_pattern_compiles_and_every_listed_example_is_a_bot() {
        assert!(BOTS.is_some(), "the bot list compiles");
        let n = BOT_PATTERNS.lines().filter(|l| !l.is_empty()).count();
        assert!(n >= 1_000, "{n} patterns");
        for p in BOT_PATTERNS.lines().filter(|l| !l.is_empty()) {
            assert!(regex::Regex::new(p).is_ok(), "pattern {p:?}");
        }
        let examples = include_str!("../data/crawler-user-agents-instances.txt");
        let mut checked = 0;
        for ex in examples.lines().filter(|l| !l.trim().is_empty()) {
            let class = classify_agent(Some(ex));
            assert!(
                matches!(class, AgentClass::KnownBot | AgentClass::NonBrowser),
                "{ex:?} is {class:?}"
            );
            checked += 1;
        }
        assert!(checked >= 1_000, "{checked} examples");
    }

    #[test]
    fn crawlers_and_headless_browsers_are_known_bots() {
        for b in [
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; \
             +http://www.google.com/bot.html) Chrome/131.0.6778.204 Safari/537.36",
            "Googlebot-Image/1.0",
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
            "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; \
             +https://openai.com/gptbot)",
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
             HeadlessChrome/131.0.0.0 Safari/537.36",
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            "Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)",
        ] {
            let t = classify(&ua(b));
            assert_eq!(t.agent, AgentClass::KnownBot, "{b}");
            assert_eq!(t.invalid_reason(None), Some(InvalidReason::KnownBot));
        }
    }

    #[test]
    fn http_libraries_are_non_browsers() {
        for b in [
            "curl/8.5.0",
            "curl/8",
            "python-requests/2.32.3",
            "Python-urllib/3.12",
            "Python/3.12 aiohttp/3.10.5",
            "Go-http-client/1.1",
            "Go-http-client/2.0",
            "Java/17.0.12",
            "okhttp/4.12.0",
            "Wget/1.21.4",
            "libwww-perl/6.77",
            "Apache-HttpClient/4.5.14 (Java/17.0.12)",
            "axios/1.7.9",
        ] {
            let t = classify(&ua(b));
            assert_eq!(t.agent, AgentClass::NonBrowser, "{b}");
            assert_eq!(t.invalid_reason(None), Some(InvalidReason::NonBrowser));
        }
    }

    #[test]
    fn a_missing_agent_is_invalid_as_non_browser() {
        for h in [AgentHeaders::default(), ua(""), ua("   ")] {
            let t = classify(&h);
            assert_eq!(t.agent, AgentClass::Missing);
            assert_eq!(t.invalid_reason(None), Some(InvalidReason::NonBrowser));
        }
    }

    #[test]
    fn server_side_insertion_is_judged_by_the_device_agent() {
        let ssai = |server: Option<&'static str>, device: &'static str| {
            classify(&AgentHeaders {
                user_agent: server,
                device_user_agent: Some(device),
                ..AgentHeaders::default()
            })
        };
        for server in [Some("Go-http-client/1.1"), Some("curl/8.5.0"), None] {
            let t = ssai(server, CHROME);
            assert_eq!(t.agent, AgentClass::Browser);
            assert!(t.server_side);
            assert_eq!(t.invalid_reason(None), None, "valid");
        }
        let t = ssai(
            Some("okhttp/4.12.0"),
            "Mozilla/5.0 (compatible; bingbot/2.0)",
        );
        assert_eq!((t.agent, t.server_side), (AgentClass::KnownBot, true));
        // A blank device header is no device header.
        let t = ssai(Some("Go-http-client/1.1"), " ");
        assert_eq!((t.agent, t.server_side), (AgentClass::NonBrowser, false));
    }

    #[test]
    fn purpose_headers_mark_prefetches() {
        let with = |f: fn(&mut AgentHeaders<'static>, &'static str), v: &'static str| {
            let mut h = ua(CHROME);
            f(&mut h, v);
            classify(&h)
        };
        let sec: fn(&mut AgentHeaders<'static>, &'static str) = |h, v| h.sec_purpose = Some(v);
        let purpose: fn(&mut AgentHeaders<'static>, &'static str) = |h, v| h.purpose = Some(v);
        let x_purpose: fn(&mut AgentHeaders<'static>, &'static str) = |h, v| h.x_purpose = Some(v);
        let x_moz: fn(&mut AgentHeaders<'static>, &'static str) = |h, v| h.x_moz = Some(v);
        for (f, v) in [
            (sec, "prefetch"),
            (sec, "prefetch;prerender"),
            (sec, "prefetch; anonymous-client-ip"),
            (purpose, "prefetch"),
            (purpose, "Prefetch"),
            (x_purpose, "preview"),
            (x_moz, "prefetch"),
        ] {
            let t = with(f, v);
            assert!(t.prefetch, "{v}");
            assert_eq!(t.agent, AgentClass::Browser);
            assert_eq!(t.invalid_reason(None), Some(InvalidReason::Prefetch));
        }
        for v in ["", "navigate", "prefetcher", "xprefetch"] {
            assert!(!with(sec, v).prefetch, "{v}");
        }
    }

    #[test]
    fn reasons_are_decided_in_order_and_old_records_are_valid() {
        use AgentClass::*;
        let v = Some(UnverifiedAdId::Foreign);
        assert_eq!(invalid_reason(None, false, None), None);
        assert_eq!(
            invalid_reason(None, false, v),
            Some(InvalidReason::UnverifiedAdId)
        );
        assert_eq!(invalid_reason(None, true, v), Some(InvalidReason::Prefetch));
        assert_eq!(
            invalid_reason(Some(Browser), true, v),
            Some(InvalidReason::Prefetch)
        );
        assert_eq!(
            invalid_reason(Some(Missing), true, v),
            Some(InvalidReason::NonBrowser)
        );
        assert_eq!(
            invalid_reason(Some(NonBrowser), true, v),
            Some(InvalidReason::NonBrowser)
        );
        assert_eq!(
            invalid_reason(Some(KnownBot), true, v),
            Some(InvalidReason::KnownBot)
        );
        let names: Vec<_> = InvalidReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            ["known_bot", "non_browser", "prefetch", "unverified_ad_id"]
        );
        for c in AgentClass::ALL {
            let json = serde_json::to_string(&c).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
        }
    }

    proptest! {
        #[test]
        fn classification_never_panics_and_is_a_function_of_the_agent(s in "\\PC{0,200}") {
            let a = classify_agent(Some(&s));
            prop_assert_eq!(a, classify_agent(Some(&s)));
            prop_assert_eq!(a == AgentClass::Missing, s.trim().is_empty());
        }

        #[test]
        fn any_http_library_agent_is_non_browser(
            i in 0..NON_BROWSER_PREFIXES.len(),
            rest in "[ -~]{0,60}",
        ) {
            let agent = format!("{}{rest}", NON_BROWSER_PREFIXES[i]);
            prop_assert_eq!(classify_agent(Some(&agent)), AgentClass::NonBrowser);
        }

        #[test]
        fn a_device_agent_decides_whatever_the_server_sends(
            server in proptest::option::of("[ -~]{0,80}"),
            device in "[ -~]{0,80}",
        ) {
            let t = classify(&AgentHeaders {
                user_agent: server.as_deref(),
                device_user_agent: Some(&device),
                ..AgentHeaders::default()
            });
            let blank = device.trim().is_empty();
            prop_assert_eq!(t.server_side, !blank);
            let judged = if blank { server.as_deref() } else { Some(device.as_str()) };
            prop_assert_eq!(t.agent, classify_agent(judged));
        }

        #[test]
        fn a_prefetch_token_anywhere_is_a_prefetch(
            before in "[a-z-]{0,12}",
            after in "[a-z-]{0,12}",
            upper in any::<bool>(),
            sep in prop::sample::select(vec![";", ",", " ", "; "]),
        ) {
            let token = if upper { "PREFETCH" } else { "prefetch" };
            let value = format!("{before}{sep}{token}{sep}{after}");
            prop_assert!(is_prefetch(&value));
        }

        #[test]
        fn valid_only_when_nothing_says_otherwise(
            agent in proptest::option::of(prop::sample::select(AgentClass::ALL.to_vec())),
            prefetch in any::<bool>(),
            ad_id in proptest::option::of(prop::sample::select(UnverifiedAdId::ALL.to_vec())),
        ) {
            let valid = matches!(agent, None | Some(AgentClass::Browser))
                && !prefetch
                && ad_id.is_none();
            prop_assert_eq!(invalid_reason(agent, prefetch, ad_id).is_none(), valid);
        }
    }
}

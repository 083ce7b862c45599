//! The planner's small domain lexicon: words related to the aspects briefs are usually asked
//! about. Replanning broadens a failed search with them; the aspect search gives them half the
//! weight of the aspect itself, and treats a sentence naming several lexicon aspects as a survey
//! sentence that speaks to each only in part.

use super::text;

/// Related words used to broaden a search for a section.
pub const SYNONYMS: &[(&str, &[&str])] = &[
    (
        "cost",
        &[
            "price", "pricing", "spend", "budget", "savings", "expense", "payback",
        ],
    ),
    (
        "risk",
        &[
            "hallucination",
            "failure",
            "downside",
            "concern",
            "privacy",
            "danger",
        ],
    ),
    (
        "accuracy",
        &["quality", "correct", "errors", "precision", "resolution"],
    ),
    (
        "benefit",
        &["advantage", "gain", "improvement", "faster", "savings"],
    ),
    ("adoption", &["rollout", "pilot", "deployment", "uptake"]),
    (
        "latency",
        &["response time", "p95", "p99", "milliseconds", "slow"],
    ),
    (
        "relevance",
        &["click-through", "ndcg", "ranking quality", "zero-result"],
    ),
    ("staff", &["agents", "headcount", "training", "workload"]),
    (
        "productivity",
        &["output", "focus", "performance", "efficiency"],
    ),
    ("wellbeing", &["burnout", "isolation", "stress", "health"]),
    (
        "installation",
        &["installer", "fitting", "retrofit", "setup"],
    ),
    (
        "efficiency",
        &["cop", "performance", "savings", "consumption"],
    ),
    ("noise", &["sound", "decibel", "loud", "quiet"]),
    (
        "regulation",
        &["compliance", "rules", "law", "legal", "audit"],
    ),
    (
        "maintenance",
        &["servicing", "repair", "lifespan", "upkeep"],
    ),
];

/// Words related to `section` (by stem), for broadening a search.
pub fn synonyms(section: &str) -> Vec<&'static str> {
    let terms = text::content_terms(section);
    SYNONYMS
        .iter()
        .filter(|(key, _)| {
            terms
                .iter()
                .any(|t| text::stem(t).starts_with(text::stem(key)))
        })
        .flat_map(|(_, words)| words.iter().copied())
        .collect()
}

/// The aspects the lexicon knows.
pub fn aspect_keys() -> impl Iterator<Item = &'static str> {
    SYNONYMS.iter().map(|(k, _)| *k)
}

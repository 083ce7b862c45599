//! Small text helpers shared by the tools and the offline planner: sentences, content terms,
//! word-prefix matching. Deterministic and allocation-light; no language model involved.

use crate::tools::bm25::tokenize;

/// Words that carry no topic: left out of queries and topic terms.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "between", "both", "but", "by", "can", "could", "do", "does", "for", "from", "has",
    "have", "how", "if", "in", "into", "is", "it", "its", "more", "most", "much", "not", "of",
    "on", "or", "other", "our", "over", "should", "so", "some", "such", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "to", "under", "up", "us",
    "was", "we", "were", "what", "when", "where", "whether", "which", "while", "who", "why",
    "will", "with", "would", "you", "your",
];

/// Words of research requests that say what to do, not what about.
const TASK_WORDS: &[&str] = &[
    "adopt",
    "analyse",
    "analysis",
    "analyze",
    "assess",
    "brief",
    "briefing",
    "compare",
    "create",
    "decide",
    "evaluate",
    "evaluating",
    "explain",
    "find",
    "give",
    "investigate",
    "make",
    "plan",
    "prepare",
    "report",
    "research",
    "review",
    "short",
    "study",
    "summarise",
    "summarize",
    "summary",
    "team",
    "trend",
    "write",
];

/// Whether `word` is a stopword.
pub fn is_stopword(word: &str) -> bool {
    // A hash and at most one comparison. A binary search called `memcmp` at every step (0.9 % of
    // a research load); a scan, which compares lengths first, still compared a word with every
    // stopword of its length (`content_terms` was then the largest caller of `memcmp`).
    static SET: std::sync::LazyLock<std::collections::HashSet<&str, foldhash::fast::RandomState>> =
        std::sync::LazyLock::new(|| STOPWORDS.iter().copied().collect());
    SET.contains(word)
}

/// Content terms of `text`, in order, without duplicates: tokens of 3+ characters that are not
/// stopwords (numbers are kept).
pub fn content_terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Only kept terms are allocated: most tokens are short words and stopwords.
    crate::tools::bm25::for_each_token(text, |t| {
        let keep = (t.len() >= 3 || t.chars().all(|c| c.is_ascii_digit())) && !is_stopword(t);
        if keep && !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    });
    out
}

/// Topic terms of a goal: its content terms minus the words that describe the task itself.
pub fn topic_terms(goal: &str) -> Vec<String> {
    content_terms(goal)
        .into_iter()
        .filter(|t| !TASK_WORDS.contains(&t.as_str()))
        .collect()
}

/// Whether some word of `text` starts with the stem of `prefix` (lower-case): "risks" matches
/// "risk", "risky" and "risks"; "cost" matches "costs" but not "accost".
pub fn has_word_prefix(text: &str, prefix: &str) -> bool {
    let stem = stem(prefix);
    // `tokenize`'s words, looked at in place: this runs for every sentence of every cited note.
    let plain = !stem.bytes().any(|b| b.is_ascii_uppercase());
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .any(|w| {
            if plain && w.is_ascii() {
                w.len() >= stem.len()
                    && w.as_bytes()[..stem.len()].eq_ignore_ascii_case(stem.as_bytes())
            } else {
                w.to_lowercase().starts_with(stem)
            }
        })
}

/// A crude stem: drops a plural or common suffix so "risks" and "risk" meet.
pub fn stem(term: &str) -> &str {
    for suffix in ["ies", "es", "s"] {
        if let Some(base) = term.strip_suffix(suffix) {
            if base.len() >= 4 {
                return base;
            }
        }
    }
    term
}

/// Whether `fields` mention `term`. A term may list alternatives separated by `|` ("staffing|
/// headcount"); an alternative of several words matches when each of its content words does.
pub fn mentions_term<'a>(fields: impl Iterator<Item = &'a str> + Clone, term: &str) -> bool {
    term.split('|').any(|alt| {
        let words = content_terms(alt);
        let words = if words.is_empty() {
            tokenize(alt)
        } else {
            words
        };
        !words.is_empty()
            && words
                .iter()
                .all(|w| fields.clone().any(|f| has_word_prefix(f, w)))
    })
}

/// The first alternative of a term ("staffing|headcount" → "staffing"), for display.
pub fn primary(term: &str) -> &str {
    term.split('|').next().unwrap_or(term).trim()
}

/// Splits text into sentences (on `.`, `!`, `?` followed by a space or the end), each trimmed.
/// Slices of `text`, copied once each (this runs over every note a brief cites).
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|&(_, n)| n.is_whitespace()) {
            let end = i + c.len_utf8();
            let s = text[start..end].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = end;
        }
    }
    let s = text[start..].trim();
    if !s.is_empty() {
        out.push(s);
    }
    out
}

/// Number of words in `text` (as `split_whitespace` counts them).
pub fn word_count(text: &str) -> usize {
    let bytes = text.as_bytes();
    if !text.is_ascii() && has_unicode_space(bytes) {
        return text.split_whitespace().count();
    }
    // Otherwise no whitespace is outside ASCII, and every byte of a multi-byte character is at
    // least 0x80, never ASCII space: the words are the bytes that are not space and follow one (or
    // start the text). Counted in chunks into a `u8`, with no state carried from byte to byte, so
    // the count vectorises: a brief's words are counted as it is written and checked, and
    // `split_whitespace` (decoding every char), then a byte loop with an "in a word" flag, cost
    // ~11 instructions a byte where this costs under 2.
    let Some(&first) = bytes.first() else {
        return 0;
    };
    let mut words = usize::from(!ascii_space(first));
    let (before, after) = (&bytes[..bytes.len() - 1], &bytes[1..]);
    for (b, a) in before.chunks(128).zip(after.chunks(128)) {
        let mut starts: u8 = 0;
        for (&b, &a) in b.iter().zip(a) {
            starts += u8::from(ascii_space(b) & !ascii_space(a));
        }
        words += usize::from(starts);
    }
    words
}

/// `char::is_whitespace` on ASCII: space, and tab, line feed, vertical tab, form feed, return
/// (0x09–0x0D).
fn ascii_space(b: u8) -> bool {
    b == b' ' || b.wrapping_sub(b'\t') < 5
}

/// Whether UTF-8 `bytes` hold a whitespace character outside ASCII (`char::is_whitespace`:
/// U+0085, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
fn has_unicode_space(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().any(|(i, &lead)| {
        let next = |k: usize| bytes.get(i + k).copied().unwrap_or(0);
        match lead {
            0xC2 => matches!(next(1), 0x85 | 0xA0),
            0xE1 => next(1) == 0x9A && next(2) == 0x80,
            0xE2 => match next(1) {
                0x80 => matches!(next(2), 0x80..=0x8A | 0xA8 | 0xA9 | 0xAF),
                0x81 => next(2) == 0x9F,
                _ => false,
            },
            0xE3 => next(1) == 0x80 && next(2) == 0x80,
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The splitting `sentences` did before it sliced: char by char into a buffer.
    fn sentences_char_by_char(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut current = String::new();
        let chars: Vec<char> = text.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            current.push(c);
            if matches!(c, '.' | '!' | '?') && chars.get(i + 1).is_none_or(|n| n.is_whitespace()) {
                let s = current.trim().to_string();
                if !s.is_empty() {
                    out.push(s);
                }
                current.clear();
            }
        }
        let s = current.trim().to_string();
        if !s.is_empty() {
            out.push(s);
        }
        out
    }

    #[test]
    fn stopwords_are_sorted_and_distinct() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]), "{STOPWORDS:?}");
        assert!(STOPWORDS.iter().all(|w| is_stopword(w)));
        assert!(!is_stopword("heat") && !is_stopword("zzz") && !is_stopword(""));
    }

    proptest! {
        /// `content_terms` is what it was when it kept `tokenize`'s tokens by the same rule.
        #[test]
        fn content_terms_keep_tokenize_s_tokens_by_the_rule(
            text in "([A-Za-zÉé0-9]{1,6}|the|The|and|of|Σ|ΣΑΣ|[ ,.;|-]){0,30}",
        ) {
            let mut expected: Vec<String> = Vec::new();
            for t in tokenize(&text) {
                let keep = (t.len() >= 3 || t.chars().all(|c| c.is_ascii_digit()))
                    && !STOPWORDS.contains(&t.as_str());
                if keep && !expected.contains(&t) {
                    expected.push(t);
                }
            }
            prop_assert_eq!(content_terms(&text), expected);
        }

        #[test]
        fn word_count_counts_as_split_whitespace(text in "([a-z.]{1,5}|[ \\t\\n\\r]|\\x0B|\\x0C|\\x1F|é|—|€|\\u{A0}|\\u{85}|\\u{1680}|[\\u{1FFF}-\\u{200B}]|[\\u{2027}-\\u{2030}]|\\u{205F}|\\u{2060}|\\u{3000}|\\u{3001}){0,300}") {
            prop_assert_eq!(word_count(&text), text.split_whitespace().count());
        }

        #[test]
        fn sentences_split_as_char_by_char(text in "([a-zé€ 0-9]|[.!?]|\\s|\\.\\.|\\. ){0,40}") {
            prop_assert_eq!(sentences(&text), sentences_char_by_char(&text));
        }
    }

    #[test]
    fn topic_terms_drop_task_words() {
        assert_eq!(
            topic_terms(
                "Create a short research plan for evaluating retrieval-augmented generation"
            ),
            vec!["retrieval", "augmented", "generation"]
        );
    }

    #[test]
    fn sentences_split_on_terminators_only_before_space() {
        assert_eq!(
            sentences("Costs fell 3.5 percent. Why? Unknown"),
            vec!["Costs fell 3.5 percent.", "Why?", "Unknown"]
        );
    }

    #[test]
    fn alternatives_and_phrases() {
        let f = ["Agents need training time."];
        assert!(mentions_term(f.iter().copied(), "staffing|training"));
        assert!(mentions_term(f.iter().copied(), "training time"));
        assert!(!mentions_term(f.iter().copied(), "training cost"));
        assert_eq!(primary("staffing|training"), "staffing");
    }

    #[test]
    fn prefixes_and_plurals_meet() {
        assert!(has_word_prefix("a risky rollout", "risks"));
        assert!(has_word_prefix("Support costs", "cost"));
        assert!(!has_word_prefix("accost", "cost"));
    }

    proptest::proptest! {
        /// Looking at words in place says what tokenizing the text first says, for any text and
        /// prefix (upper case, accents and digits included).
        #[test]
        fn word_prefix_in_place_matches_tokenized(
            text in "[a-zA-Zé0-9 ,.-]{0,40}",
            prefix in "[a-zA-Zé0-9]{0,6}",
        ) {
            let stem = stem(&prefix);
            let tokenized = tokenize(&text).iter().any(|w| w.starts_with(stem));
            proptest::prop_assert_eq!(has_word_prefix(&text, &prefix), tokenized);
        }
    }
}

//! The command line a paused thread is answered with, printed by `research` and `acquire` so a
//! person can paste it: the program as it was started, the command, every flag the answer needs
//! to reach the same thread the same way (`--checkpoint` when it is not the default, a model or a
//! topology other than the default), then `--thread` and `--resume`. Each word is quoted for a
//! POSIX shell, so a URL or an answer with spaces or quotes pastes as one word.

/// The program as it was started (`argv[0]`: `planwright` on the `PATH`, or the path `cargo run`
/// ran), so the line runs the same binary.
fn program() -> String {
    std::env::args()
        .next()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "planwright".to_string())
}

/// `word` quoted for a POSIX shell: as it is when it holds only characters no shell treats
/// specially, otherwise in single quotes (a `'` inside written `'\''`).
pub fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The flag `name value` when `value` is not `default` (a flag left at its default is left out).
pub fn unless_default<'a>(
    name: &'a str,
    value: &'a str,
    default: &str,
) -> Option<(&'a str, &'a str)> {
    (value != default).then_some((name, value))
}

/// `PROGRAM COMMAND [FLAG VALUE]… --thread THREAD --resume ANSWER`, every word quoted for a
/// POSIX shell.
pub fn resume_command(command: &str, flags: &[(&str, &str)], thread: &str, answer: &str) -> String {
    let mut words = vec![program(), command.to_string()];
    for (name, value) in flags {
        words.push(name.to_string());
        words.push(value.to_string());
    }
    words.extend([
        "--thread".into(),
        thread.into(),
        "--resume".into(),
        answer.into(),
    ]);
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_a_shell_would_split_or_expand_them() {
        assert_eq!(
            shell_quote("sqlite:.planwright/x.db"),
            "sqlite:.planwright/x.db"
        );
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            shell_quote(r#"{"action": "approve"}"#),
            r#"'{"action": "approve"}'"#
        );
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }

    #[test]
    fn the_line_holds_every_flag_given_then_the_thread_and_the_answer() {
        let flags: Vec<_> = [
            unless_default("--checkpoint", "sqlite:my dir/t.db", "sqlite:d.db"),
            unless_default("--model", "offline", "offline"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let line = resume_command("research", &flags, "t1", r#"{"action": "approve"}"#);
        assert!(
            line.ends_with(
                r#" research --checkpoint 'sqlite:my dir/t.db' --thread t1 --resume '{"action": "approve"}'"#
            ),
            "{line}"
        );
    }
}

//! How a tool server is named on the command line: `mcp+stdio:COMMAND` (a child process speaking
//! MCP on its stdin and stdout) or `mcp+http://HOST:PORT/PATH` (a Streamable HTTP endpoint),
//! optionally prefixed with `NAME=` to choose the name the server's tools are cited under.
//!
//! A spec is parsed before anything starts, so a typo is a bad-input error naming the spec, not a
//! failure halfway through a run.

use super::McpError;
use std::fmt;
use std::str::FromStr;

/// Where a tool server is and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A child process started with `program` and `args`; MCP over its stdin and stdout.
    Stdio {
        /// The program (looked up on `PATH`).
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint's URL (`http://…` or `https://…`).
        url: String,
    },
}

/// One tool server as given by `--tools`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// The name its tools are cited under (`NAME=` in the spec, else derived from the command or
    /// the host; made unique among the servers of a run by [`unique_names`]).
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::Stdio { program, args } => {
                write!(f, "mcp+stdio:{program}")?;
                for a in args {
                    write!(f, " {a}")?;
                }
                Ok(())
            }
            Transport::Http { url } => write!(f, "mcp+{url}"),
        }
    }
}

fn bad(spec: &str, reason: impl Into<String>) -> McpError {
    McpError::BadSpec {
        spec: spec.to_string(),
        reason: reason.into(),
    }
}

/// Whether `name` may name a server: letters, digits, `-` and `_` (it goes into citation ids).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `name` with every character a citation id cannot hold replaced by `-`, runs collapsed.
pub(crate) fn sanitize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        "server".into()
    } else {
        out
    }
}

/// Programs that start another program named by their first plain argument.
const LAUNCHERS: &[&str] = &[
    "npx", "bunx", "uvx", "pipx", "node", "python", "python3", "deno", "bun", "uv",
];

/// The name of a stdio server: the package or script a launcher starts (`npx -y
/// @modelcontextprotocol/server-filesystem ./docs` → `server-filesystem`), else the program.
fn stdio_name(program: &str, args: &[String]) -> String {
    let base = |s: &str| -> String {
        let s = s.rsplit('/').next().unwrap_or(s);
        // A version (`pkg@1.2`) and a script's extension go.
        let s = s.split('@').next().unwrap_or(s);
        let s = [".py", ".mjs", ".js", ".ts"]
            .iter()
            .find_map(|ext| s.strip_suffix(ext))
            .unwrap_or(s);
        sanitize(s)
    };
    let prog = program.rsplit('/').next().unwrap_or(program);
    if LAUNCHERS.contains(&prog) {
        let mut skip_value = false;
        for a in args {
            if skip_value {
                skip_value = false;
                continue;
            }
            if a == "-m" || a == "--from" || a == "-p" || a == "--package" {
                // `python -m module`: the module is the name.
                if a == "-m" {
                    skip_value = false;
                    continue;
                }
                skip_value = true;
                continue;
            }
            if a.starts_with('-') || a == "run" || a == "exec" {
                continue;
            }
            return base(a.trim_start_matches('@'));
        }
    }
    base(prog)
}

/// The name of an HTTP server: its host and port (`http://127.0.0.1:8000/mcp` → `127-0-0-1-8000`).
fn http_name(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    sanitize(authority)
}

/// Splits a command line into words: whitespace separates, `'…'` and `"…"` quote, `\` escapes
/// the next character outside single quotes.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err("unclosed single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x) => cur.push(x),
                            None => return Err("a trailing backslash".into()),
                        },
                        Some(x) => cur.push(x),
                        None => return Err("unclosed double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(x) => cur.push(x),
                    None => return Err("a trailing backslash".into()),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

impl FromStr for ServerSpec {
    type Err = McpError;

    fn from_str(spec: &str) -> Result<Self, McpError> {
        let spec_trim = spec.trim();
        let (name, rest) = match spec_trim.split_once('=') {
            Some((n, r)) if !n.contains(':') && !n.contains(' ') => {
                if !valid_name(n) {
                    return Err(bad(
                        spec,
                        format!("`{n}` cannot name a server (letters, digits, `-`, `_`)"),
                    ));
                }
                (Some(n.to_string()), r)
            }
            _ => (None, spec_trim),
        };
        let transport = if let Some(cmd) = rest.strip_prefix("mcp+stdio:") {
            let cmd = cmd.trim();
            // The whole command in quotes (`mcp+stdio:"npx -y pkg ./docs"`, as the spec is
            // written when no shell took the quotes off): its inside is the command line.
            let cmd = ['"', '\'']
                .iter()
                .find_map(|q| {
                    let inner = cmd.strip_prefix(*q)?.strip_suffix(*q)?;
                    (!inner.contains(*q)).then_some(inner)
                })
                .unwrap_or(cmd);
            let mut words = split_command(cmd).map_err(|e| bad(spec, e))?;
            if words.is_empty() {
                return Err(bad(spec, "no command after `mcp+stdio:`"));
            }
            let program = words.remove(0);
            Transport::Stdio {
                program,
                args: words,
            }
        } else if let Some(url) = rest.strip_prefix("mcp+") {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(bad(
                    spec,
                    "expected `mcp+stdio:COMMAND`, `mcp+http://…` or `mcp+https://…`",
                ));
            }
            if url.split_once("://").is_none_or(|(_, r)| r.is_empty()) {
                return Err(bad(spec, "no host in the URL"));
            }
            Transport::Http {
                url: url.to_string(),
            }
        } else {
            return Err(bad(
                spec,
                "a tool server is `mcp+stdio:COMMAND` or `mcp+http://HOST:PORT/PATH`",
            ));
        };
        let name = name.unwrap_or_else(|| match &transport {
            Transport::Stdio { program, args } => stdio_name(program, args),
            Transport::Http { url } => http_name(url),
        });
        Ok(ServerSpec { name, transport })
    }
}

/// Makes the servers' names unique, in order: a repeated name gets `-2`, `-3`, ….
pub fn unique_names(specs: &mut [ServerSpec]) {
    let mut seen: Vec<String> = Vec::new();
    for s in specs.iter_mut() {
        let mut name = s.name.clone();
        let mut n = 2;
        while seen.contains(&name) {
            name = format!("{}-{n}", s.name);
            n += 1;
        }
        seen.push(name.clone());
        s.name = name;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> ServerSpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn stdio_specs_split_like_a_shell_and_name_the_package() {
        let s = parse(r#"mcp+stdio:npx -y @modelcontextprotocol/server-filesystem "./my docs""#);
        assert_eq!(s.name, "server-filesystem");
        assert_eq!(
            s.transport,
            Transport::Stdio {
                program: "npx".into(),
                args: vec![
                    "-y".into(),
                    "@modelcontextprotocol/server-filesystem".into(),
                    "./my docs".into()
                ],
            }
        );
        assert_eq!(
            parse("mcp+stdio:python3 fixtures/mcp/misbehaving_server.py hang").name,
            "misbehaving_server"
        );
        assert_eq!(parse("mcp+stdio:/usr/bin/my-tool --x").name, "my-tool");
        assert_eq!(parse("docs=mcp+stdio:npx -y pkg@1.2").name, "docs");
        assert_eq!(parse("mcp+stdio:npx -y pkg@1.2").name, "pkg");
        // Quoted whole, as in a config file or a command line no shell unquoted.
        let quoted = parse(r#"mcp+stdio:"npx -y @modelcontextprotocol/server-filesystem ./docs""#);
        assert_eq!(
            quoted.transport,
            Transport::Stdio {
                program: "npx".into(),
                args: vec![
                    "-y".into(),
                    "@modelcontextprotocol/server-filesystem".into(),
                    "./docs".into()
                ],
            }
        );
        assert_eq!(quoted.name, "server-filesystem");
    }

    #[test]
    fn http_specs_keep_the_url_and_name_the_host() {
        let s = parse("mcp+http://127.0.0.1:8000/mcp");
        assert_eq!(s.name, "127-0-0-1-8000");
        assert_eq!(
            s.transport,
            Transport::Http {
                url: "http://127.0.0.1:8000/mcp".into()
            }
        );
        assert_eq!(parse("kb=mcp+https://kb.example/mcp").name, "kb");
    }

    #[test]
    fn bad_specs_name_the_spec_and_the_problem() {
        for (spec, why) in [
            ("stdio:npx x", "a tool server is"),
            ("mcp+stdio:", "no command"),
            ("mcp+stdio:npx 'open", "unclosed single quote"),
            ("mcp+ftp://x", "expected"),
            ("mcp+http://", "no host"),
            ("bad name=mcp+http://x", "a tool server is"),
            ("a.b=mcp+http://x", "cannot name a server"),
        ] {
            let e = spec.parse::<ServerSpec>().unwrap_err().to_string();
            assert!(e.contains(spec.trim()) && e.contains(why), "{spec}: {e}");
        }
    }

    #[test]
    fn repeated_names_get_a_number() {
        let mut specs = vec![
            parse("mcp+http://h:1/mcp"),
            parse("mcp+http://h:1/mcp"),
            parse("mcp+http://h:1/mcp"),
        ];
        unique_names(&mut specs);
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["h-1", "h-1-2", "h-1-3"]);
    }
}

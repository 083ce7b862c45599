//! The workspace's layering, checked from its source: the map at the top of
//! `docs/architecture.md`, as rules over the `use` lines and `crate::`/`super::` paths of every
//! source file.
//!
//! A file's imports are read from its text (comments, string literals and `#[cfg(test)]` modules
//! left out: a unit test may use anything of its crate) and resolved to module paths of its
//! crate, through the re-exports of `mod.rs` files (`crate::RunError` is
//! `runtime::error::RunError`). Paths are resolved by name only: an item named like a sibling
//! module (`research::graph`, a function beside `research/graph.rs`) counts as that module. The
//! rules are tables below: read them as the map.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

// ------------------------------------------------------------------------------------------------
// The rules
// ------------------------------------------------------------------------------------------------

/// A room (a module and everything under it) that never imports some other rooms.
struct Never {
    /// The crate's source folder.
    krate: &'static str,
    /// The room, as a module path (`runtime::machine`).
    room: &'static str,
    /// Rooms it never imports.
    never: &'static [&'static str],
    /// Why.
    why: &'static str,
}

const NEVER: &[Never] = &[
    Never {
        krate: "src",
        room: "graph",
        never: &["runtime", "runs"],
        why: "a graph says what to run; the runtime runs it",
    },
    Never {
        krate: "src",
        room: "checkpoint",
        never: &["runtime", "graph", "runs", "store", "node", "state"],
        why: "a checkpointer stores records and knows no graph, run or state type",
    },
    Never {
        krate: "src",
        room: "runtime",
        never: &["runs"],
        why: "the runtime runs graphs; the server's run records sit beside it, not below",
    },
    Never {
        krate: "src",
        room: "runs",
        never: &["runtime", "graph"],
        why: "the run store keeps a server's runs; it does not run them",
    },
    Never {
        krate: "src",
        room: "store",
        never: &["runtime", "graph", "runs"],
        why: "the long-term store is a service nodes use, below the runtime",
    },
    Never {
        krate: "src",
        room: "node",
        never: &["runtime", "runs"],
        why: "the graph vocabulary (nodes, state, events) sits below the runtime",
    },
    Never {
        krate: "src",
        room: "state",
        never: &["runtime", "runs"],
        why: "the graph vocabulary (nodes, state, events) sits below the runtime",
    },
    Never {
        krate: "src",
        room: "events",
        never: &["runtime", "runs"],
        why: "the graph vocabulary (nodes, state, events) sits below the runtime",
    },
    Never {
        krate: "actors/src",
        room: "research",
        never: &["serve", "load", "bench", "field"],
        why: "a planner is a library: the server and the load driver use it, never the reverse; one planner never imports another",
    },
    Never {
        krate: "actors/src",
        room: "field",
        never: &["serve", "load", "bench", "research"],
        why: "a planner is a library: the server and the load driver use it, never the reverse; one planner never imports another",
    },
    Never {
        krate: "actors/src",
        room: "kit",
        never: &["research", "field", "serve", "load"],
        why: "the planners' shared parts sit below the planners",
    },
    Never {
        krate: "actors/src",
        room: "model",
        never: &["research", "field", "serve", "load", "kit"],
        why: "models sit below everything that calls them",
    },
    Never {
        krate: "actors/src",
        room: "tools",
        never: &["research", "field", "serve", "load"],
        why: "tools sit below the planners that call them",
    },
];

/// The runtime's rooms, lowest first: each imports only rooms listed before it (and itself).
const RUNTIME_LAYERS: &[&str] = &[
    "runtime::error",    // why a run fails or is refused
    "runtime::run",      // the public types a run is started, followed and resumed with
    "runtime::machine",  // the step machine: pure decisions, no I/O
    "runtime::storage",  // durability modes, the checkpoint writer, paused threads
    "runtime::subgraph", // what an engine knows of its subgraphs
    "runtime::actors",   // supervisor and node actors: carry out what the machine says
    "runtime::engine",   // the engine and its builder
];

/// Planners the load driver reaches only through their entry points: the items their root
/// module (`research/mod.rs`) declares or re-exports, never an inner module.
const PLANNERS: &[&str] = &["research", "field"];

/// Paths from `load/` into a planner's inner modules that are known and allowed for now.
const LOAD_REACHES_IN: &[(&str, &str)] = &[
    // field/ is reworked in parallel (this session); once it settles, these become re-exports of
    // its root and the lines go.
    ("load/acquire.rs", "field::input"),
    ("load/acquire.rs", "field::schema"),
    ("load/acquire.rs", "field::stages"),
    ("load/mod.rs", "field::runner"),
];

/// Import loops between the files of one folder that are known and allowed for now, by folder:
/// a loop found elsewhere, or one that takes in more files, fails the test (`*`: any loop of
/// that folder).
const KNOWN_LOOPS: &[(&str, &[&str])] = &[
    // field/ is reworked in parallel (this session): any loop of its files, until that settles.
    ("actors/src/field", &["*"]),
    // Left for a follow-up of issue 41. The corpus caches each note's citation evidence, which
    // citation checking computes from the corpus.
    ("actors/src/research", &["citations", "corpus"]),
    // The dictionary's trainer runs the research graph (`research::graph`, in `mod.rs`), whose
    // builder names the dictionary.
    ("actors/src/research", &["dictionary", "graph", "mod"]),
];

// ------------------------------------------------------------------------------------------------
// The checks
// ------------------------------------------------------------------------------------------------

#[test]
fn rooms_never_import_what_the_map_forbids() {
    let mut broken = Vec::new();
    for rule in NEVER {
        let krate = Crate::read(rule.krate);
        for (file, target) in krate.imports_from(rule.room) {
            if let Some(bad) = rule.never.iter().find(|n| within(&target, n)) {
                broken.push(format!(
                    "{file} imports {target} ({bad}): {} never imports {bad}: {}",
                    rule.room, rule.why
                ));
            }
        }
    }
    assert!(broken.is_empty(), "\n{}\n", broken.join("\n"));
}

#[test]
fn runtime_rooms_import_only_the_rooms_below_them() {
    let krate = Crate::read("src");
    let mut broken = Vec::new();
    for (i, room) in RUNTIME_LAYERS.iter().enumerate() {
        for (file, target) in krate.imports_from(room) {
            let above = RUNTIME_LAYERS[i + 1..].iter().find(|r| within(&target, r));
            if let Some(above) = above {
                broken.push(format!(
                    "{file} imports {target}: {room} may import only the runtime rooms below it, \
                     and {above} is above it"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "\n{}\n", broken.join("\n"));
}

#[test]
fn the_load_driver_reaches_planners_only_through_their_entry_points() {
    let krate = Crate::read("actors/src");
    let mut broken = Vec::new();
    for planner in PLANNERS {
        let entry = krate.root_items(planner);
        for (file, target) in krate.named_from("load") {
            let segs: Vec<&str> = target.split("::").collect();
            if segs[0] != *planner || segs.len() < 2 || entry.contains(segs[1]) {
                continue;
            }
            let inner = format!("{planner}::{}", segs[1]);
            if LOAD_REACHES_IN.contains(&(file.as_str(), inner.as_str())) {
                continue;
            }
            broken.push(format!(
                "{file} reaches into {target}: load/ uses a planner only through what its root \
                 module exports"
            ));
        }
    }
    assert!(broken.is_empty(), "\n{}\n", broken.join("\n"));
}

#[test]
fn no_file_import_loop_inside_a_room() {
    let mut broken = Vec::new();
    for dir in ["src", "actors/src"] {
        let krate = Crate::read(dir);
        for (folder, files) in krate.loops() {
            let known = KNOWN_LOOPS.iter().any(|(f, allowed)| {
                *f == folder
                    && (allowed.contains(&"*")
                        || files.iter().all(|x| allowed.contains(&x.as_str())))
            });
            if !known {
                broken.push(format!("{folder}: {} import each other", files.join(", ")));
            }
        }
    }
    assert!(broken.is_empty(), "\n{}\n", broken.join("\n"));
}

/// The reader itself: comments, strings, `use` trees, `super::` and re-exports.
#[test]
fn the_reader_resolves_what_a_file_names() {
    let src = r#"
        //! use crate::runtime::Engine;
        use super::{a::{self, B}, c as d};
        pub use crate::x::Y;
        fn f() { let s = "crate::runtime::x"; let c = '"'; crate::z::w(); $crate::q::r(); }
    "#;
    let mut named = names_in(src, false);
    named.sort();
    assert_eq!(
        named,
        [
            "crate::x::Y",
            "crate::z::w",
            "super::a",
            "super::a::B",
            "super::c"
        ]
    );
    // A `mod.rs` re-exports with `pub use`: a front door, not an import of the room.
    assert_eq!(
        names_in("pub use crate::x::Y; use crate::z;", true),
        ["crate::z"]
    );
    // A unit test may use anything of its crate.
    let with_tests = "use crate::a::B;\n#[cfg(test)]\nmod tests { use crate::c::D; fn t() {} }";
    assert_eq!(names_in(with_tests, false), ["crate::a::B"]);
}

// ------------------------------------------------------------------------------------------------
// Reading a crate
// ------------------------------------------------------------------------------------------------

/// Whether module path `path` is `room` or inside it.
fn within(path: &str, room: &str) -> bool {
    path == room || path.starts_with(&format!("{room}::"))
}

struct SourceFile {
    /// Relative to the crate's source folder (`runtime/engine/mod.rs`).
    rel: String,
    /// Its module path (`runtime::engine`).
    module: Vec<String>,
    /// The module paths it names, resolved (`runtime::error::RunError`).
    imports: Vec<String>,
    /// The same paths as it spells them (`runtime::RunError`).
    named: Vec<String>,
}

struct Crate {
    dir: PathBuf,
    files: Vec<SourceFile>,
}

impl Crate {
    fn read(dir: &str) -> Crate {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut paths = Vec::new();
        collect(&dir, &mut paths);
        let mut raw = Vec::new();
        for p in &paths {
            let rel = p
                .strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let module = module_of(&rel);
            let text = std::fs::read_to_string(p).unwrap();
            let is_mod = ["mod.rs", "lib.rs", "main.rs"]
                .iter()
                .any(|m| rel.ends_with(m));
            let named: Vec<Vec<String>> = names_in(&text, is_mod)
                .iter()
                .filter_map(|n| absolute(&module, n))
                .collect();
            let reexports = if is_mod {
                reexports_in(&text, &module)
            } else {
                Vec::new()
            };
            raw.push((rel, module, named, reexports));
        }
        let aliases: HashMap<String, Vec<String>> = raw
            .iter()
            .flat_map(|(_, _, _, r)| r.iter().cloned())
            .collect();
        let files = raw
            .into_iter()
            .map(|(rel, module, named, _)| SourceFile {
                rel,
                module,
                imports: named.iter().map(|n| resolve(n.clone(), &aliases)).collect(),
                named: named.iter().map(|n| n.join("::")).collect(),
            })
            .collect();
        Crate { dir, files }
    }

    /// Every (file, import) of the files of `room`, leaving out what the room names of itself.
    fn imports_from(&self, room: &str) -> Vec<(String, String)> {
        self.paths_from(room, |f| &f.imports)
    }

    /// The same, as the files spell them (before following re-exports).
    fn named_from(&self, room: &str) -> Vec<(String, String)> {
        self.paths_from(room, |f| &f.named)
    }

    fn paths_from(
        &self,
        room: &str,
        paths: impl Fn(&SourceFile) -> &Vec<String>,
    ) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for f in &self.files {
            if !within(&f.module.join("::"), room) {
                continue;
            }
            for i in paths(f) {
                if !within(i, room) {
                    out.push((f.rel.clone(), i.clone()));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The names a module's root declares or re-exports (its entry points).
    fn root_items(&self, module: &str) -> BTreeSet<String> {
        let text = std::fs::read_to_string(self.dir.join(module).join("mod.rs")).unwrap();
        let code = strip(&text);
        let mut out = BTreeSet::new();
        for (_, public, tree, _) in use_statements(&code) {
            if !public {
                continue;
            }
            for path in expand(tree) {
                out.insert(path.rsplit("::").next().unwrap_or(&path).to_string());
            }
            // `pub use notes::bundled as bundled_notes`: the name it goes by.
            for alias in tree.split(" as ").skip(1) {
                out.insert(
                    alias
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect(),
                );
            }
        }
        for line in code.lines().map(str::trim) {
            let Some(rest) = line.strip_prefix("pub ") else {
                continue;
            };
            let rest = rest.strip_prefix("async ").unwrap_or(rest);
            for kind in [
                "fn ", "struct ", "enum ", "type ", "const ", "trait ", "static ",
            ] {
                if let Some(name) = rest.strip_prefix(kind) {
                    let name = name
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_');
                    out.insert(name.collect());
                }
            }
        }
        out
    }

    /// Import loops between the files (and subfolders) of each folder below the crate root.
    fn loops(&self) -> Vec<(String, Vec<String>)> {
        let mut folders: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> =
            BTreeMap::new();
        for f in &self.files {
            let folder = folder_module(&f.rel);
            if folder.is_empty() {
                continue; // the crate root is the map's rooms, ruled above
            }
            folders.entry(folder).or_default();
        }
        let children: BTreeSet<Vec<String>> = self.files.iter().map(|f| f.module.clone()).collect();
        let node_of = |folder: &[String], path: &[String]| -> Option<String> {
            if path.len() < folder.len() || path[..folder.len()] != *folder {
                return None;
            }
            match path.get(folder.len()) {
                Some(child)
                    if children.iter().any(|c| {
                        c.len() > folder.len()
                            && c[..folder.len()] == *folder
                            && c[folder.len()] == *child
                    }) =>
                {
                    Some(child.clone())
                }
                _ => Some("mod".to_string()),
            }
        };
        for (folder, edges) in folders.iter_mut() {
            for f in &self.files {
                let Some(from) = node_of(folder, &f.module) else {
                    continue;
                };
                for i in &f.imports {
                    let path: Vec<String> = i.split("::").map(String::from).collect();
                    if let Some(to) = node_of(folder, &path) {
                        if to != from {
                            edges.entry(from.clone()).or_default().insert(to);
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (folder, edges) in &folders {
            let name = if self.dir.ends_with("actors/src") {
                "actors/src"
            } else {
                "src"
            };
            for scc in cycles(edges) {
                out.push((format!("{name}/{}", folder.join("/")), scc));
            }
        }
        out
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `runtime/engine/mod.rs` is `runtime::engine`; `lib.rs` is the root.
fn module_of(rel: &str) -> Vec<String> {
    let mut segs: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(
        segs.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segs.pop();
    }
    segs
}

/// The module of the folder a file is in.
fn folder_module(rel: &str) -> Vec<String> {
    let mut segs: Vec<String> = rel.split('/').map(String::from).collect();
    segs.pop();
    segs
}

/// A file's text without comments, string and character literals.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i = src[i..].find("*/").map_or(b.len(), |j| i + j + 2);
        } else if b[i..].starts_with(b"r#\"") {
            i = src[i + 3..].find("\"#").map_or(b.len(), |j| i + 3 + j + 2);
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && (b[i..].starts_with(b"'\\") || b.get(i + 2) == Some(&b'\'')) {
            // A character literal ('"', '\''); a lifetime has no closing quote.
            let from = if b[i + 1] == b'\\' { i + 3 } else { i + 2 };
            i = src[from..].find('\'').map_or(b.len(), |j| from + j + 1);
            out.push_str("' '");
        } else {
            let c = src[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Code without its `#[cfg(test)]` modules: a unit test may use anything of its crate.
fn without_test_modules(code: &str) -> String {
    const TEST: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(TEST) {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let is_mod = after[TEST.len()..].trim_start().starts_with("mod ");
        let Some(open) = after.find('{').filter(|_| is_mod) else {
            out.push_str(TEST);
            rest = &after[TEST.len()..];
            continue;
        };
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The paths a file names: its `use` trees, expanded, and the `crate::`/`super::`/`self::` paths
/// in its code. A `mod.rs` file's `pub use` lines are its room's front door, not imports.
fn names_in(src: &str, is_mod: bool) -> Vec<String> {
    let code = without_test_modules(&strip(src));
    let mut out = Vec::new();
    let mut rest = String::new();
    let mut from = 0;
    for (at, public, tree, end) in use_statements(&code) {
        rest.push_str(&code[from..at]);
        from = end;
        if !(is_mod && public) {
            out.extend(expand(tree));
        }
    }
    rest.push_str(&code[from..]);
    // Paths in the code: from the crate root, or through a name a `use` brought in
    // (`use crate::field;` then `field::runner::migration`).
    let mut starts: Vec<(String, String)> = ["crate", "super", "self"]
        .iter()
        .map(|s| (format!("{s}::"), format!("{s}::")))
        .collect();
    for path in &out {
        if let Some((_, last)) = path.rsplit_once("::") {
            starts.push((format!("{last}::"), format!("{path}::")));
        }
    }
    let b = rest.as_bytes();
    let mut found = Vec::new();
    for (start, replace) in &starts {
        let mut from = 0;
        while let Some(j) = rest[from..].find(start.as_str()) {
            let at = from + j;
            from = at + start.len();
            if at > 0 && (is_ident(b[at - 1]) || matches!(b[at - 1], b':' | b'$')) {
                continue;
            }
            let path: String = rest[from..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            found.push(format!("{replace}{}", path.trim_end_matches(':')));
        }
    }
    out.extend(found);
    for p in &mut out {
        *p = p.trim_end_matches(':').to_string();
    }
    out.retain(|p| p.contains("::"));
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The `use` statements of stripped code: (start, public, tree, end).
fn use_statements(code: &str) -> Vec<(usize, bool, &str, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(j) = code[from..].find("use") {
        let at = from + j;
        from = at + 3;
        let before_ok = at == 0 || !(is_ident(b[at - 1]) || b[at - 1] == b':');
        let after_ok = b.get(at + 3).is_some_and(|c| c.is_ascii_whitespace());
        if !before_ok || !after_ok {
            continue;
        }
        let Some(len) = code[at..].find(';') else {
            break;
        };
        let tree = code[at + 3..at + len].trim();
        // `pub use` / `pub(crate) use`: the visibility just before.
        let head = code[..at].trim_end();
        let head = match head.strip_suffix(')') {
            Some(h) => h.rfind('(').map_or(h, |k| &h[..k]),
            None => head,
        };
        let public =
            head.ends_with("pub") && !head[..head.len() - 3].bytes().last().is_some_and(is_ident);
        out.push((at, public, tree, at + len + 1));
        from = at + len + 1;
    }
    out
}

/// `a::{b, c::{self, d}}` as `a::b`, `a::c`, `a::c::d` (aliases dropped, globs as their module).
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let prefix = tree[..open].trim_end_matches("::");
        let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut parts = Vec::new();
        let (mut depth, mut cur) = (0, String::new());
        for c in body.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(std::mem::take(&mut cur));
                    continue;
                }
                _ => {}
            }
            cur.push(c);
        }
        parts.push(cur);
        let mut out = Vec::new();
        for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            if p == "self" {
                out.push(prefix.to_string());
            } else {
                out.extend(expand(p).into_iter().map(|x| format!("{prefix}::{x}")));
            }
        }
        return out;
    }
    let path = tree.split(" as ").next().unwrap_or(tree).trim();
    vec![path.trim_end_matches("::*").to_string()]
}

/// A named path as a module path of the crate, `None` for another crate's.
fn absolute(module: &[String], named: &str) -> Option<Vec<String>> {
    let mut segs = named
        .split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .peekable();
    let mut out: Vec<String> = match *segs.peek()? {
        "crate" => {
            segs.next();
            Vec::new()
        }
        "super" | "self" => module.to_vec(),
        _ => return None,
    };
    for s in segs {
        match s {
            "super" => {
                out.pop();
            }
            "self" | "*" => {}
            s => out.push(s.to_string()),
        }
    }
    Some(out)
}

/// A `mod.rs` file's re-exports: (`runtime::RunError`, `runtime::error::RunError`).
fn reexports_in(src: &str, module: &[String]) -> Vec<(String, Vec<String>)> {
    let code = strip(src);
    let mut out = Vec::new();
    for (_, public, tree, _) in use_statements(&code) {
        if !public {
            continue;
        }
        let tree_text: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
        for path in expand(&tree_text) {
            let relative = if path.starts_with("crate")
                || path.starts_with("super")
                || path.starts_with("self")
            {
                path.clone()
            } else {
                format!("self::{path}")
            };
            let Some(target) = absolute(module, &relative) else {
                continue;
            };
            let Some(name) = target.last() else { continue };
            let mut key = module.to_vec();
            key.push(name.clone());
            if key != target {
                out.push((key.join("::"), target));
            }
        }
    }
    out
}

/// Follows re-exports: `runtime::RunError::x` becomes `runtime::error::RunError::x`.
fn resolve(mut path: Vec<String>, aliases: &HashMap<String, Vec<String>>) -> String {
    for _ in 0..8 {
        let hit = (1..=path.len())
            .rev()
            .find_map(|k| aliases.get(&path[..k].join("::")).map(|t| (k, t.clone())));
        match hit {
            Some((k, mut target)) => {
                target.extend(path[k..].iter().cloned());
                if target == path {
                    break;
                }
                path = target;
            }
            None => break,
        }
    }
    path.join("::")
}

/// The loops of a directed graph: its strongly connected parts of more than one node, sorted.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = edges.keys().chain(edges.values().flatten()).collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut out: BTreeSet<Vec<String>> = BTreeSet::new();
    for n in &nodes {
        let part: Vec<String> = nodes
            .iter()
            .filter(|m| reached[*n].contains(**m) && reached[**m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        if part.len() > 1 {
            out.insert(part);
        }
    }
    out.into_iter().collect()
}

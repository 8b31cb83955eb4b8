//! The import graph between the modules of one crate, read from its source text.
//!
//! A module is a file (`a.rs`, `a/mod.rs`, `a/b.rs`). Every `crate::`, `self::` and
//! `super::` path a file names (in `use` trees, nested groups included, and in code) is
//! resolved to the deepest file module it reaches. An edge joins two *siblings*: the
//! children of their closest common ancestor on each side, so `functions/classify.rs`
//! naming `crate::app::AppState` is the edge `functions → app` under the crate root, and
//! `classifier/train.rs` naming `super::evaluate::evaluate` is `train → evaluate` under
//! `classifier`. A module reaching into its own ancestors or descendants is no edge:
//! that is how a parent and its children are meant to talk.
//!
//! Comments (doc links included) and literals are stripped before reading, and `$crate`
//! (a macro's own crate) is not a module path. Inline `mod name { ... }` blocks (a file's
//! tests) move `self` and `super` one level down, as the compiler does.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Sibling edges of a crate, grouped by the module whose children they join
/// (`""` for the crate root).
pub type Graph = BTreeMap<String, BTreeMap<(String, String), Vec<String>>>;

/// Reads every module of the crate rooted at `src` (its `lib.rs`; `bin/` is other crates)
/// and returns the sibling edges between them.
pub fn crate_graph(repo: &Path, src: &str) -> Graph {
    let root = repo.join(src);
    let mut files = Vec::new();
    collect_files(&root, &mut files);
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .filter_map(|file| {
            let rel = file.strip_prefix(&root).ok()?;
            if rel.starts_with("bin") {
                return None;
            }
            Some((module_path(rel), rel.display().to_string()))
        })
        .collect();
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, rel) in &modules {
        let text = fs::read_to_string(root.join(rel)).expect("read source");
        for (line, target) in referenced_paths(&strip_comments_and_literals(&text), module) {
            let Some(edge) = sibling_edge(module, &deepest_module(&target, &known)) else {
                continue;
            };
            let parent = edge.0.join("::");
            graph
                .entry(parent)
                .or_default()
                .entry((edge.1, edge.2))
                .or_default()
                .push(format!("{src}/{rel}:{line}"));
        }
    }
    graph
}

/// Modules that import each other (a strongly connected set of siblings), with one place
/// per edge that makes it.
#[derive(Debug, Clone)]
pub struct Cycle {
    /// `crate` or `crate::a::b`: the module whose children they are.
    pub scope: String,
    /// Sorted.
    pub members: Vec<String>,
    /// Readable: the members and each edge between them with where it is written.
    pub detail: String,
}

/// The cycles among siblings. Empty when the graph is acyclic.
pub fn cycles(crate_name: &str, graph: &Graph) -> Vec<Cycle> {
    let mut found = Vec::new();
    for (parent, edges) in graph {
        for component in strongly_connected(edges) {
            if component.len() < 2 {
                continue;
            }
            let inside: BTreeSet<&String> = component.iter().collect();
            let mut lines = Vec::new();
            for ((from, to), places) in edges {
                if inside.contains(from) && inside.contains(to) {
                    let more = places.len() - 1;
                    let also = if more > 0 {
                        format!(" (and {more} more)")
                    } else {
                        String::new()
                    };
                    lines.push(format!("    {from} → {to}: {}{also}", places[0]));
                }
            }
            let scope = if parent.is_empty() {
                "crate".to_owned()
            } else {
                format!("crate::{parent}")
            };
            let detail = format!(
                "{crate_name}, under {scope}: {{{}}} import each other\n{}",
                component.join(", "),
                lines.join("\n")
            );
            found.push(Cycle {
                scope,
                members: component,
                detail,
            });
        }
    }
    found
}

fn collect_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `lib.rs` → `[]`, `a.rs` and `a/mod.rs` → `[a]`, `a/b.rs` → `[a, b]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("lib" | "mod")) {
        parts.pop();
    }
    parts
}

/// The longest prefix of `path` that is a file module.
fn deepest_module(path: &[String], known: &BTreeSet<Vec<String>>) -> Vec<String> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| known.contains(prefix))
        .unwrap_or_default()
}

/// `(common ancestor, child on `from`'s side, child on `to`'s side)`, or `None` when one
/// module contains the other.
fn sibling_edge(from: &[String], to: &[String]) -> Option<(Vec<String>, String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((
        from[..common].to_vec(),
        from[common].clone(),
        to[common].clone(),
    ))
}

/// Source text with comments, string and char literals blanked out; line breaks kept so
/// line numbers stay true.
pub fn strip_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_newlines = |s: &[char], out: &mut String| {
        out.extend(s.iter().filter(|c| **c == '\n'));
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let start = i;
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            keep_newlines(&chars[start..i.min(chars.len())], &mut out);
        } else if c == 'r' && matches!(next, Some('#' | '"')) && !ident_before(&chars, i) {
            let start = i;
            let mut hashes = 0;
            i += 1;
            while chars.get(i) == Some(&'#') {
                hashes += 1;
                i += 1;
            }
            if chars.get(i) != Some(&'"') {
                // `r#ident`, a raw identifier.
                out.extend(&chars[start..i]);
                continue;
            }
            i += 1;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            keep_newlines(&chars[start..i.min(chars.len())], &mut out);
            out.push_str("\"\"");
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            keep_newlines(&chars[start..i.min(chars.len())], &mut out);
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only the former closes.
            let close = if next == Some('\\') {
                (i + 3..chars.len().min(i + 12)).find(|&k| chars[k] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// True when `chars[i]` continues an identifier (`fr"`, not `r"` or `br"`).
fn ident_before(chars: &[char], i: usize) -> bool {
    let is_ident = |k: usize| chars[k].is_alphanumeric() || chars[k] == '_';
    i > 0 && is_ident(i - 1) && !(chars[i - 1] == 'b' && (i < 2 || !is_ident(i - 2)))
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Other(char),
}

fn tokens(text: &str) -> Vec<(usize, Token)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((line, Token::Ident(chars[start..i].iter().collect())));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((line, Token::PathSep));
            i += 2;
        } else {
            out.push((
                line,
                match c {
                    '{' => Token::Open,
                    '}' => Token::Close,
                    ',' => Token::Comma,
                    other => Token::Other(other),
                },
            ));
            i += 1;
        }
    }
    out
}

/// Every module-relative path the text names, resolved to absolute segments, with its line.
fn referenced_paths(text: &str, file_module: &[String]) -> Vec<(usize, Vec<String>)> {
    let toks = tokens(text);
    let mut out = Vec::new();
    // Inline `mod name {` blocks: their names and the brace depth they close at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].1 {
            Token::Open => depth += 1,
            Token::Close => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Token::Ident(word) if word == "mod" => {
                if let (Some((_, Token::Ident(name))), Some((_, Token::Open))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.clone(), depth));
                }
            }
            Token::Ident(word)
                if matches!(word.as_str(), "crate" | "self" | "super")
                    && toks.get(i + 1).map(|t| &t.1) == Some(&Token::PathSep)
                    && !path_continues(&toks, i) =>
            {
                let mut here = file_module.to_vec();
                here.extend(inline.iter().map(|(n, _)| n.clone()));
                let line = toks[i].0;
                let mut paths = Vec::new();
                let end = use_tree(&toks, i, Vec::new(), &mut paths);
                for raw in paths {
                    if let Some(abs) = resolve(&raw, &here) {
                        out.push((line, abs));
                    }
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// True when the keyword at `i` is not a path's start: `$crate`, or `a::self`.
fn path_continues(toks: &[(usize, Token)], i: usize) -> bool {
    i > 0 && matches!(toks[i - 1].1, Token::PathSep | Token::Other('$'))
}

/// Reads the path (or `use` tree) starting at `i` into `out`, each as its raw segments;
/// returns the index after it.
fn use_tree(
    toks: &[(usize, Token)],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match toks.get(i).map(|t| &t.1) {
            Some(Token::Ident(seg)) => {
                prefix.push(seg.clone());
                i += 1;
                if toks.get(i).map(|t| &t.1) == Some(&Token::PathSep) {
                    i += 1;
                    continue;
                }
                out.push(prefix);
                if toks.get(i).map(|t| &t.1) == Some(&Token::Ident("as".to_owned())) {
                    i += 2;
                }
                return i;
            }
            Some(Token::Open) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.1) {
                        Some(Token::Close) => return i + 1,
                        Some(Token::Comma) => i += 1,
                        None => return i,
                        Some(_) => {
                            let before = i;
                            i = use_tree(toks, i, prefix.clone(), out);
                            if i == before {
                                // Anything a use tree does not hold: step over it.
                                i += 1;
                            }
                        }
                    }
                }
            }
            other => {
                // `a::*` or a path ending in punctuation: what was read so far.
                if !prefix.is_empty() {
                    out.push(prefix);
                }
                return if other == Some(&Token::Other('*')) {
                    i + 1
                } else {
                    i
                };
            }
        }
    }
}

/// Raw segments (`crate`, `self`, `super` leading, `self` inside groups) made absolute.
fn resolve(raw: &[String], here: &[String]) -> Option<Vec<String>> {
    let mut abs = here.to_vec();
    let mut rest = raw.iter().peekable();
    match rest.peek().map(|s| s.as_str()) {
        Some("crate") => {
            abs.clear();
            rest.next();
        }
        Some("self") => {
            rest.next();
        }
        Some("super") => {
            while rest.peek().map(|s| s.as_str()) == Some("super") {
                abs.pop()?;
                rest.next();
            }
        }
        _ => return None,
    }
    abs.extend(rest.filter(|s| *s != "self").cloned());
    Some(abs)
}

/// Tarjan's strongly connected components of the sibling graph.
fn strongly_connected(edges: &BTreeMap<(String, String), Vec<String>>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    struct Walk<'a> {
        next: &'a BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        w.on_stack.insert(v);
        for &u in &w.next[v] {
            if !w.index.contains_key(u) {
                visit(w, u);
                let low = w.low[v].min(w.low[u]);
                w.low.insert(v, low);
            } else if w.on_stack.contains(u) {
                let low = w.low[v].min(w.index[u]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut component = Vec::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack.remove(u);
                component.push(u.to_owned());
                if u == v {
                    break;
                }
            }
            component.sort();
            w.found.push(component);
        }
    }
    let mut walk = Walk {
        next: &next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in next.keys() {
        if !walk.index.contains_key(v) {
            visit(&mut walk, v);
        }
    }
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(text: &str, module: &[&str]) -> Vec<String> {
        let module: Vec<String> = module.iter().map(|s| (*s).to_owned()).collect();
        referenced_paths(&strip_comments_and_literals(text), &module)
            .into_iter()
            .map(|(_, p)| p.join("::"))
            .collect()
    }

    #[test]
    fn use_trees_nested_groups_and_relative_paths_resolve() {
        let text = "use crate::a::{b::{C, d}, self, e::*};\n\
                    use super::train::{self as t};\n\
                    fn f() { let x = crate::z::y(); $crate::no::path(); }\n";
        assert_eq!(
            paths(text, &["classifier", "evaluate"]),
            [
                "a::b::C",
                "a::b::d",
                "a",
                "a::e",
                "classifier::train",
                "z::y"
            ]
        );
    }

    #[test]
    fn comments_literals_and_test_modules_do_not_mislead() {
        let text = "// use crate::hidden;\n/* crate::also::hidden */\n\
                    const S: &str = \"crate::in_string\";\n\
                    const R: &str = r#\"crate::raw\"#;\n\
                    fn g<'a>(c: char) -> bool { c == '\"' }\n\
                    mod tests { use super::*; use super::super::sibling; }\n";
        assert_eq!(paths(text, &["m", "f"]), ["m::f", "m::sibling"]);
    }

    #[test]
    fn a_two_module_cycle_is_named_and_a_parent_child_link_is_not() {
        let mut graph = Graph::new();
        let root = graph.entry(String::new()).or_default();
        root.insert(("app".into(), "functions".into()), vec!["app.rs:1".into()]);
        root.insert(("functions".into(), "app".into()), vec!["f.rs:2".into()]);
        root.insert(("functions".into(), "error".into()), vec!["f.rs:3".into()]);
        let found = cycles("handlers", &graph);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].scope, "crate");
        assert_eq!(found[0].members, ["app", "functions"]);
        assert!(
            found[0].detail.contains("app → functions: app.rs:1"),
            "{}",
            found[0].detail
        );
        assert!(sibling_edge(&["a".into()], &["a".into(), "b".into()]).is_none());
    }
}

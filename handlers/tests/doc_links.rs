//! Every link between the repository's Markdown documents resolves: a relative link
//! names a file that exists, and a `#fragment` names a heading of its target as GitHub
//! renders it. The README sends operators to sections of docs/operations.md by anchor; a
//! renamed heading must fail here, not on the day someone follows the link.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("handlers/ sits inside the repository")
        .to_path_buf()
}

/// The Markdown files of the repository, build output and dependencies left out.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let skipped = ["target", ".git", "node_modules"];
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !skipped.contains(&name.as_str()) {
                    stack.push(path);
                }
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The lines outside fenced code blocks, with their line numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut in_fence = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence {
            out.push((i + 1, line));
        }
    }
    out
}

/// `[text](target)` links: the visible text of each, and its target.
fn links(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find("](") else {
            break;
        };
        let text = &after[..close];
        let target_start = &after[close + 2..];
        let Some(end) = target_start.find(')') else {
            break;
        };
        out.push((text.to_owned(), target_start[..end].to_owned()));
        rest = &target_start[end + 1..];
    }
    out
}

/// A heading's anchor as GitHub makes it: the rendered text lower-cased, every character
/// that is not a letter, digit, `-`, `_` or space dropped, each space a `-`.
fn slug(heading: &str) -> String {
    let mut rendered = heading.to_owned();
    // A link in a heading renders as its text.
    for (text, target) in links(heading) {
        rendered = rendered.replace(&format!("[{text}]({target})"), &text);
    }
    rendered
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a document's headings, numbered as GitHub numbers repeated ones.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

#[test]
fn headings_become_the_anchors_github_renders() {
    assert_eq!(slug("Status (`GET /api/status`)"), "status-get-apistatus");
    assert_eq!(
        slug("Dead letters: list, fix, re-submit"),
        "dead-letters-list-fix-re-submit"
    );
    assert_eq!(
        slug("Redis full (`maxmemory` reached)"),
        "redis-full-maxmemory-reached"
    );
    assert_eq!(slug("p1-p2-behind-deadline"), "p1-p2-behind-deadline");
    let twice = anchors("## Runbook\ntext\n### Runbook\n```\n# not a heading\n```\n");
    assert_eq!(
        twice,
        BTreeSet::from(["runbook".to_owned(), "runbook-1".to_owned()])
    );
}

#[test]
fn every_link_between_the_documents_resolves() {
    let root = repo_root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        for (number, line) in prose_lines(&text) {
            for (_, target) in links(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, fragment) = match target.split_once('#') {
                    Some((path, fragment)) => (path, Some(fragment)),
                    None => (target.as_str(), None),
                };
                let linked = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                checked += 1;
                if !linked.exists() {
                    broken.push(format!("{shown} (line {number}): no file {target}"));
                    continue;
                }
                let Some(fragment) = fragment else {
                    continue;
                };
                let linked_text = std::fs::read_to_string(&linked).unwrap();
                if !anchors(&linked_text).contains(fragment) {
                    broken.push(format!(
                        "{shown} (line {number}): no heading #{fragment} in {}",
                        linked.strip_prefix(&root).unwrap_or(&linked).display()
                    ));
                }
            }
        }
    }
    assert!(
        checked > 10,
        "only {checked} links found: is the parser right?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

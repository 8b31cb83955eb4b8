//! Rule: every Bicep source parses without syntax errors.

use super::bicep::{BicepFile, descendants};

/// A place where the parser had to skip text (`ERROR`) or invent a token (`MISSING`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxProblem {
    pub at: String,
    pub what: String,
}

pub fn syntax_problems(file: &BicepFile) -> Vec<SyntaxProblem> {
    descendants(file.root())
        .into_iter()
        .filter_map(|node| {
            let what = if node.is_missing() {
                format!("missing {}", node.kind())
            } else if node.is_error() {
                format!("unexpected `{}`", first_line(file.text(node)))
            } else {
                return None;
            };
            Some(SyntaxProblem {
                at: format!("{}:{}", file.at(node), node.start_position().column + 1),
                what,
            })
        })
        .collect()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

//! Bicep and `.bicepparam` sources parsed with tree-sitter-bicep, plus the tree queries the rules share.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;
use tree_sitter::{Node, Parser, Tree};

/// One parsed Bicep or parameter file.
pub struct BicepFile {
    path: PathBuf,
    source: String,
    tree: Tree,
}

impl BicepFile {
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let source =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(path, source)
    }

    pub fn parse(path: impl Into<PathBuf>, source: String) -> anyhow::Result<Self> {
        let path = path.into();
        let source = if is_param_file(&path) {
            param_file_as_bicep(&source)
        } else {
            source
        };
        let mut parser = Parser::new();
        parser
            .set_language(&tree_sitter_bicep::LANGUAGE.into())
            .context("loading the Bicep grammar")?;
        let tree = parser
            .parse(&source, None)
            .with_context(|| format!("parsing {}", path.display()))?;
        Ok(Self { path, source, tree })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_param_file(&self) -> bool {
        is_param_file(&self.path)
    }

    pub fn root(&self) -> Node<'_> {
        self.tree.root_node()
    }

    pub fn text(&self, node: Node<'_>) -> &str {
        &self.source[node.byte_range()]
    }

    /// `path:line` of a node, for messages.
    pub fn at(&self, node: Node<'_>) -> String {
        format!("{}:{}", self.path.display(), node.start_position().row + 1)
    }

    /// Top-level declarations of one kind (`parameter_declaration`, `variable_declaration`, ...).
    pub fn declarations(&self, kind: &str) -> Vec<Node<'_>> {
        named_children(self.root())
            .into_iter()
            .filter(|node| node.kind() == kind)
            .collect()
    }

    /// The top-level declaration of `kind` named `name`.
    pub fn declaration(&self, kind: &str, name: &str) -> Option<Node<'_>> {
        self.declarations(kind)
            .into_iter()
            .find(|decl| self.declared_name(*decl) == Some(name))
    }

    /// The identifier a declaration introduces.
    pub fn declared_name(&self, decl: Node<'_>) -> Option<&str> {
        named_children(decl)
            .into_iter()
            .find(|child| child.kind() == "identifier")
            .map(|ident| self.text(ident))
    }

    /// The value after `=` of a `var` (or a rewritten `.bicepparam` assignment), or a `param`'s default.
    pub fn assigned_value<'t>(&self, decl: Node<'t>) -> Option<Node<'t>> {
        let children = named_children(decl);
        match decl.kind() {
            "variable_declaration" => children.get(1).copied(),
            "parameter_declaration" => children.get(2).copied(),
            _ => None,
        }
    }

    /// Names of the decorators written just above a declaration (`secure`, `batchSize`, ...), with their calls.
    pub fn decorators<'t>(&self, decl: Node<'t>) -> Vec<(String, Node<'t>)> {
        let Some(previous) = decl.prev_named_sibling() else {
            return Vec::new();
        };
        if previous.kind() != "decorators" {
            return Vec::new();
        }
        named_children(previous)
            .into_iter()
            .filter_map(|decorator| named_children(decorator).into_iter().next())
            .filter_map(|call| {
                let function = call.child_by_field_name("function")?;
                Some((self.text(function).to_owned(), call))
            })
            .collect()
    }

    /// The literal text of a string node, with every `${...}` replaced by [`INTERPOLATION`].
    pub fn string_literal(&self, string: Node<'_>) -> String {
        let mut text = String::new();
        for part in named_children(string) {
            match part.kind() {
                "interpolation" => text.push(INTERPOLATION),
                "escape_sequence" => text.push_str(unescape(self.text(part))),
                _ => text.push_str(self.text(part)),
            }
        }
        text
    }

    /// The value of a string node that has no interpolation.
    pub fn plain_string(&self, node: Node<'_>) -> Option<String> {
        (node.kind() == "string")
            .then(|| self.string_literal(node))
            .filter(|text| !text.contains(INTERPOLATION))
    }

    /// An object literal's properties as (key, value) pairs, in source order.
    pub fn object_entries<'t>(&self, object: Node<'t>) -> Vec<(String, Node<'t>)> {
        named_children(object)
            .into_iter()
            .filter(|child| child.kind() == "object_property")
            .filter_map(|property| {
                let parts = named_children(property);
                let key = *parts.first()?;
                let value = *parts.get(1)?;
                Some((self.property_key(key), value))
            })
            .collect()
    }

    /// The value of `key` in an object literal.
    pub fn property<'t>(&self, object: Node<'t>, key: &str) -> Option<Node<'t>> {
        self.object_entries(object)
            .into_iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value)
    }

    /// Follows a dotted path of keys through nested object literals.
    pub fn property_path<'t>(&self, object: Node<'t>, path: &[&str]) -> Option<Node<'t>> {
        path.iter().try_fold(object, |current, key| {
            (current.kind() == "object")
                .then(|| self.property(current, key))
                .flatten()
        })
    }

    /// Resources declared with a type that starts with `type_prefix` (e.g. `Microsoft.Web/sites/config@`).
    pub fn resources_of_type(&self, type_prefix: &str) -> Vec<Node<'_>> {
        self.declarations("resource_declaration")
            .into_iter()
            .filter(|resource| {
                named_children(*resource)
                    .into_iter()
                    .find(|child| child.kind() == "string")
                    .and_then(|ty| self.plain_string(ty))
                    .is_some_and(|ty| ty.starts_with(type_prefix))
            })
            .collect()
    }

    /// The object a resource or module declares: its body, the body of `if (...) {...}`, or the loop body.
    pub fn declared_body<'t>(&self, decl: Node<'t>) -> Option<Node<'t>> {
        let value = named_children(decl).into_iter().last()?;
        match value.kind() {
            "object" => Some(value),
            "if_statement" => named_children(value).into_iter().last(),
            "for_statement" => value.child_by_field_name("body"),
            _ => None,
        }
    }

    /// The module declared from `path` (as written after `module name`).
    pub fn module(&self, path: &str) -> Option<Node<'_>> {
        self.declarations("module_declaration")
            .into_iter()
            .find(|module| {
                named_children(*module)
                    .into_iter()
                    .find(|child| child.kind() == "string")
                    .and_then(|source| self.plain_string(source))
                    .is_some_and(|source| source == path)
            })
    }

    /// The `params` a module declaration passes, as (name, expression) pairs.
    pub fn module_params<'t>(&self, module: Node<'t>) -> Vec<(String, Node<'t>)> {
        self.declared_body(module)
            .and_then(|body| self.property(body, "params"))
            .filter(|params| params.kind() == "object")
            .map(|params| self.object_entries(params))
            .unwrap_or_default()
    }

    fn property_key(&self, key: Node<'_>) -> String {
        match key.kind() {
            "string" => self.string_literal(key),
            _ => self.text(key).trim_end_matches('?').to_owned(),
        }
    }
}

/// Stands for a `${...}` interpolation inside [`BicepFile::string_literal`]'s result.
pub const INTERPOLATION: char = '\u{0}';

/// Every node below `node`, in document order.
pub fn descendants(node: Node<'_>) -> Vec<Node<'_>> {
    let mut found = Vec::new();
    let mut cursor = node.walk();
    let mut stack = vec![node];
    while let Some(current) = stack.pop() {
        found.push(current);
        let children: Vec<Node<'_>> = current.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    found
}

pub fn named_children(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// The repository's `infra/` directory.
pub fn infra_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra")
}

/// Broken examples the rules must reject.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/infra")
}

/// Every `.bicep` and `.bicepparam` file below `dir`, sorted.
pub fn bicep_files_under(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in
            fs::read_dir(&current).with_context(|| format!("listing {}", current.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if is_bicep_source(&path) {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Reads and parses every Bicep source below `dir`.
pub fn read_all(dir: &Path) -> anyhow::Result<Vec<BicepFile>> {
    bicep_files_under(dir)?
        .iter()
        .map(|path| BicepFile::read(path))
        .collect()
}

fn is_bicep_source(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|ext| ext.to_str()),
        Some("bicep" | "bicepparam")
    )
}

fn is_param_file(path: &Path) -> bool {
    path.extension().and_then(|ext| ext.to_str()) == Some("bicepparam")
}

/// A `.bicepparam` file is Bicep expressions plus `using` and untyped `param name = value` assignments, which
/// the grammar does not know. Each such `param` keyword becomes `var  ` (same length, so lines and columns still
/// point into the original file) and the rest is parsed as ordinary Bicep.
fn param_file_as_bicep(source: &str) -> String {
    source
        .split_inclusive('\n')
        .map(|line| {
            let indent = line.len() - line.trim_start().len();
            let rest = &line[indent..];
            if is_untyped_param_assignment(rest) {
                format!("{}var  {}", &line[..indent], &rest["param".len()..])
            } else {
                line.to_owned()
            }
        })
        .collect()
}

fn is_untyped_param_assignment(line: &str) -> bool {
    let Some(after_keyword) = line.strip_prefix("param") else {
        return false;
    };
    if !after_keyword.starts_with(char::is_whitespace) {
        return false;
    }
    let after_name = after_keyword
        .trim_start()
        .trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
    after_name.trim_start().starts_with('=')
}

fn unescape(sequence: &str) -> &str {
    match sequence {
        "\\'" => "'",
        "\\\\" => "\\",
        "\\n" => "\n",
        "\\r" => "\r",
        "\\t" => "\t",
        "\\$" => "$",
        other => other,
    }
}

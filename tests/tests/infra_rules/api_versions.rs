//! Rule: resources are declared with stable API versions, never a `-preview` one.

use super::bicep::{BicepFile, named_children};

/// `path:line: type@version` of every resource declared with a preview API version.
pub fn preview_api_versions(file: &BicepFile) -> Vec<String> {
    file.declarations("resource_declaration")
        .into_iter()
        .filter_map(|resource| {
            let declared = named_children(resource)
                .into_iter()
                .find(|child| child.kind() == "string")
                .and_then(|ty| file.plain_string(ty))?;
            let (_, version) = declared.split_once('@')?;
            version
                .contains("preview")
                .then(|| format!("{}: {declared}", file.at(resource)))
        })
        .collect()
}

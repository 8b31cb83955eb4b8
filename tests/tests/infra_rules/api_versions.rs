//! Rule: resources are declared with stable API versions, never a `-preview` one, except where the type has no
//! stable version that does the job: [`PREVIEW_EXCEPTIONS`] names each with its reason, and a test holds the
//! reason to the type index (the stable versions it lists are all older than the preview taken).

use super::bicep::{BicepFile, named_children};

/// `type@version` taken at a preview version, and why.
pub const PREVIEW_EXCEPTIONS: &[(&str, &str)] = &[(
    "Microsoft.Insights/diagnosticSettings@2021-05-01-preview",
    "no stable version after 2016-09-01, whose shape is the legacy per-resource `service` setting without category groups",
)];

/// `path:line: type@version` of every resource declared with a preview API version that is not an exception.
pub fn preview_api_versions(file: &BicepFile) -> Vec<String> {
    file.declarations("resource_declaration")
        .into_iter()
        .filter_map(|resource| {
            let declared = named_children(resource)
                .into_iter()
                .find(|child| child.kind() == "string")
                .and_then(|ty| file.plain_string(ty))?;
            let (_, version) = declared.split_once('@')?;
            let excepted = PREVIEW_EXCEPTIONS
                .iter()
                .any(|(exception, _)| exception.eq_ignore_ascii_case(&declared));
            (version.contains("preview") && !excepted)
                .then(|| format!("{}: {declared}", file.at(resource)))
        })
        .collect()
}

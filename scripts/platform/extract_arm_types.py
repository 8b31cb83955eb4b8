#!/usr/bin/env python3
"""Extracts the resource-type facts `tests/tests/infra_rules/resource_types.rs` checks infra/ against.

Reads the Bicep type index (github.com/Azure/bicep-types-az, MIT licence: generated/<provider>/<namespace>/
<api-version>/types.json) from a git checkout and writes, for every `'<type>@<api-version>'` declared in
infra/, the writable shape of its body: properties, which are required, which read-only, string enums and
integer bounds. Descriptions and read-only subtrees are left out; the output is stormgate's own format.

    scripts/platform/extract_arm_types.py /path/to/bicep-types-az > tests/fixtures/platform/arm-resource-types.json

The checkout must be a git repository (its HEAD commit is recorded).
"""

import json
import re
import subprocess
import sys
from pathlib import Path

REQUIRED, READ_ONLY, WRITE_ONLY = 1, 2, 4
ROOT = Path(__file__).resolve().parents[2]


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def used_types():
    found = set()
    for path in sorted((ROOT / "infra").rglob("*.bicep")):
        for match in re.finditer(r"'([A-Za-z]+\.[A-Za-z]+/[A-Za-z/]+)@([0-9a-z-]+)'", path.read_text()):
            found.add((match.group(1), match.group(2)))
    return sorted(found)


class Extractor:
    def __init__(self, repo):
        self.repo = repo
        self.files = git(repo, "ls-tree", "-r", "--name-only", "HEAD", "generated").splitlines()
        self.loaded = {}
        self.out = {}
        self.ids = {}

    def load(self, path):
        if path not in self.loaded:
            self.loaded[path] = json.loads(git(self.repo, "show", f"HEAD:{path}"))
        return self.loaded[path]

    def find(self, resource_type, version):
        namespace = resource_type.split("/")[0].lower()
        wanted = f"{resource_type}@{version}".lower()
        for path in self.files:
            parts = path.split("/")
            if len(parts) == 5 and parts[2] == namespace and parts[3] == version and parts[4] == "types.json":
                types = self.load(path)
                for entry in types:
                    if entry["$type"] == "ResourceType" and entry["name"].lower() == wanted:
                        if entry.get("writableScopes", 1) != 0:
                            return path, entry
        raise SystemExit(f"{resource_type}@{version}: not in the type index")

    def ref(self, path, reference):
        return int(reference["$ref"].removeprefix("#/"))

    def convert(self, path, index):
        key = (path, index)
        if key in self.ids:
            return self.ids[key]
        name = f"t{len(self.ids)}"
        self.ids[key] = name
        node = self.load(path)[index]
        kind = node["$type"]
        if kind == "StringType":
            out = {"kind": "string"}
            for bound in ("minLength", "maxLength", "pattern"):
                if bound in node:
                    out[bound] = node[bound]
        elif kind == "StringLiteralType":
            out = {"kind": "string", "enum": [node["value"]], "open": False}
        elif kind == "UnionType":
            elements = [self.load(path)[self.ref(path, e)] for e in node["elements"]]
            if all(e["$type"] in ("StringLiteralType", "StringType") for e in elements):
                out = {
                    "kind": "string",
                    "enum": sorted(e["value"] for e in elements if e["$type"] == "StringLiteralType"),
                    "open": any(e["$type"] == "StringType" for e in elements),
                }
            else:
                out = {"kind": "union", "of": [self.convert(path, self.ref(path, e)) for e in node["elements"]]}
        elif kind == "IntegerType":
            out = {"kind": "int"}
            for bound in ("minValue", "maxValue"):
                if bound in node:
                    out[bound] = node[bound]
        elif kind == "BooleanType":
            out = {"kind": "bool"}
        elif kind == "AnyType":
            out = {"kind": "any"}
        elif kind == "ArrayType":
            out = {"kind": "array", "items": self.convert(path, self.ref(path, node["itemType"]))}
        elif kind == "ObjectType":
            out = {"kind": "object", "name": node["name"], "properties": self.properties(path, node.get("properties", {}))}
            if "additionalProperties" in node:
                out["additional"] = self.convert(path, self.ref(path, node["additionalProperties"]))
        elif kind == "DiscriminatedObjectType":
            out = {
                "kind": "discriminated",
                "name": node["name"],
                "discriminator": node["discriminator"],
                "base": self.properties(path, node.get("baseProperties", {})),
                "variants": {value: self.convert(path, self.ref(path, r)) for value, r in sorted(node["elements"].items())},
            }
        else:
            out = {"kind": "any", "was": kind}
        self.out[name] = out
        return name

    def properties(self, path, properties):
        out = {}
        for prop, spec in sorted(properties.items()):
            flags = spec.get("flags", 0)
            entry = {}
            if flags & REQUIRED:
                entry["required"] = True
            if flags & READ_ONLY and not flags & (REQUIRED | WRITE_ONLY):
                entry["readonly"] = True
            else:
                entry["type"] = self.convert(path, self.ref(path, spec["type"]))
            out[prop] = entry
        return out


def main():
    repo = sys.argv[1]
    extractor = Extractor(repo)
    resources = {}
    for resource_type, version in used_types():
        path, entry = extractor.find(resource_type, version)
        resources[f"{resource_type}@{version}"] = {
            "file": path,
            "body": extractor.convert(path, extractor.ref(path, entry["body"])),
        }
    # For a type declared at a preview version, the stable versions the index holds: a preview is taken only
    # when no stable version will do, and the API-version rule says why.
    stable_versions = {}
    for declared in resources:
        resource_type, version = declared.split("@")
        if "preview" not in version:
            continue
        namespace = resource_type.split("/")[0].lower()
        found = []
        for path in extractor.files:
            parts = path.split("/")
            if len(parts) == 5 and parts[2] == namespace and parts[4] == "types.json" and "preview" not in parts[3]:
                names = {e["name"].lower() for e in extractor.load(path) if e["$type"] == "ResourceType"}
                if f"{resource_type}@{parts[3]}".lower() in names:
                    found.append(parts[3])
        stable_versions[resource_type] = sorted(set(found))
    commit = git(repo, "rev-parse", "HEAD").strip()
    json.dump(
        {
            "about": "The writable shape of every resource type infra/ declares, at its API version: properties, "
            "required ones, read-only ones, string enums (open = the type also takes other strings), integer "
            "bounds. Extracted by scripts/platform/extract_arm_types.py from the Bicep type index; descriptions "
            "and read-only subtrees left out.",
            "source": {
                "repo": "https://github.com/Azure/bicep-types-az",
                "commit": commit,
                "licence": "MIT",
                "files": sorted({r["file"] for r in resources.values()}),
            },
            "resources": resources,
            "stable_versions_of_preview_types": stable_versions,
            "types": extractor.out,
        },
        sys.stdout,
        indent=1,
        sort_keys=False,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

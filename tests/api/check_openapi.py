#!/usr/bin/env python3
"""Validates api/openapi.yaml and, given a directory of recorded responses, checks that every
response the daemon really sent matches the contract.

usage: check_openapi.py [--partial] SPEC [RESPONSES_DIR]

--partial: the responses are a sample (the e2e suite's, from whichever e2e tests ran), so an
operation without a recorded 2xx answer is not a failure, and no responses at all is "nothing
to check".

Each recorded response is a JSON file {method, path, status, content_type, body} written by
the in-process HTTP tests (tests/daemon/http/api_fixture.cc); `body` is the parsed JSON, a list
of parsed lines for application/x-ndjson, or text. Checks:
  * the document is OpenAPI 3.0 (openapi-spec-validator when installed, plus our own checks:
    every $ref resolves, every operation has an operationId and responses, path parameters
    are declared);
  * every response matches an operation and a documented status (or `default`), a documented
    media type, and the JSON schema of that media type (OpenAPI `nullable` honoured);
  * every documented operation was exercised with at least one 2xx response (or a 101 for a
    WebSocket upgrade, recorded by the test that saw the switch).
Exits 1 with one line per failure.
"""
import copy
import glob
import json
import os
import re
import sys

import jsonschema
import yaml

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def fail_list():
    errors = []
    return errors, errors.append


def resolve_pointer(doc, ref):
    if not ref.startswith("#/"):
        raise KeyError(ref)
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[part]
    return node


def check_refs(doc, node, where, err):
    if isinstance(node, dict):
        if "$ref" in node:
            try:
                resolve_pointer(doc, node["$ref"])
            except (KeyError, TypeError):
                err(f"{where}: unresolved $ref {node['$ref']}")
        for k, v in node.items():
            check_refs(doc, v, f"{where}/{k}", err)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            check_refs(doc, v, f"{where}[{i}]", err)


def deref(doc, node):
    while isinstance(node, dict) and "$ref" in node:
        node = resolve_pointer(doc, node["$ref"])
    return node


def check_structure(doc, err):
    if not str(doc.get("openapi", "")).startswith("3.0."):
        err("openapi: must be 3.0.x")
    if not doc.get("info", {}).get("title") or not doc.get("info", {}).get("version"):
        err("info: title and version are required")
    if "bearerAuth" not in doc.get("components", {}).get("securitySchemes", {}):
        err("components.securitySchemes: bearerAuth is missing")
    check_refs(doc, doc, "#", err)
    seen_ids = set()
    for path, item in doc.get("paths", {}).items():
        names = set(re.findall(r"{([^}]+)}", path))
        shared = [deref(doc, p) for p in item.get("parameters", [])]
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            where = f"{method.upper()} {path}"
            op_id = op.get("operationId")
            if not op_id:
                err(f"{where}: no operationId")
            elif op_id in seen_ids:
                err(f"{where}: duplicate operationId {op_id}")
            seen_ids.add(op_id)
            if not op.get("responses"):
                err(f"{where}: no responses")
            params = shared + [deref(doc, p) for p in op.get("parameters", [])]
            declared = {p["name"] for p in params if p.get("in") == "path"}
            if declared != names:
                err(f"{where}: path parameters {sorted(names)} declared as {sorted(declared)}")
            for status, resp in op.get("responses", {}).items():
                resp = deref(doc, resp)
                if status.startswith(("4", "5")) or status == "default":
                    if "application/problem+json" not in resp.get("content", {}):
                        err(f"{where} {status}: errors must be application/problem+json")
    try:
        import openapi_spec_validator as osv
    except ImportError:
        return
    try:
        if hasattr(osv, "validate_spec"):
            osv.validate_spec(doc)
        else:
            osv.validate(doc)
    except Exception as e:  # the validator's own exception types vary between versions
        err(f"openapi-spec-validator: {str(e).splitlines()[0]}")


def to_json_schema(node):
    """OpenAPI 3.0 schema object -> JSON Schema (nullable -> anyOf with null)."""
    if isinstance(node, list):
        return [to_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k in ("nullable", "example", "discriminator", "xml", "externalDocs", "deprecated",
                 "readOnly", "writeOnly"):
            continue
        if k in ("properties", "patternProperties"):
            out[k] = {name: to_json_schema(s) for name, s in v.items()}
        else:
            out[k] = to_json_schema(v)
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def template_regex(path):
    return re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(path)) + "$")


def check_responses(doc, directory, err, partial=False):
    converted = to_json_schema(copy.deepcopy(doc))
    components = converted.get("components", {})
    templates = [(template_regex(p), p) for p in doc.get("paths", {})]
    exercised = set()
    files = sorted(glob.glob(os.path.join(directory, "*.json")))
    if not files:
        err(f"{directory}: no recorded responses (did the HTTP tests run with "
            "ARMHIVE_API_RESPONSES_DIR set?)")
        return
    for f in files:
        with open(f, encoding="utf-8") as fh:
            rec = json.load(fh)
        method, path, status = rec["method"].lower(), rec["path"], rec["status"]
        media = rec["content_type"].split(";")[0].strip()
        where = f"{os.path.basename(f)}: {method.upper()} {path} -> {status}"
        matches = [t for rx, t in templates if rx.match(path)]
        # Literal paths win over templates (/v1/benchmarks/compare vs /v1/benchmarks/{id}).
        matches.sort(key=lambda t: t.count("{"))
        if not matches:
            if status == 404 and media == "application/problem+json":
                op_schema = {"$ref": "#/components/schemas/Problem"}
                validate(rec["body"], op_schema, components, where, err)
            else:
                err(f"{where}: path not in the contract")
            continue
        template = matches[0]
        op = doc["paths"][template].get(method)
        if op is None:
            if status == 404:
                continue  # httplib answers unknown methods with 404
            err(f"{where}: method not in the contract for {template}")
            continue
        responses = op.get("responses", {})
        resp = responses.get(str(status)) or responses.get("default")
        if resp is None:
            err(f"{where}: status {status} not documented for {method.upper()} {template}")
            continue
        resp = deref(doc, resp)
        content = resp.get("content", {})
        if status in (101, 204) and not content and not media:
            # A protocol upgrade (WebSocket) or No Content: no body to check.
            exercised.add((method, template))
            if rec["body"] not in ("", None):
                err(f"{where}: status {status} with a body")
            continue
        if media not in content:
            err(f"{where}: media type {media} not documented (have {sorted(content)})")
            continue
        if 200 <= status < 300:
            exercised.add((method, template))
        schema = to_json_schema(content[media].get("schema", {}))
        if media == "application/x-ndjson":
            if not isinstance(rec["body"], list):
                err(f"{where}: expected a list of lines")
                continue
            for i, line in enumerate(rec["body"]):
                validate(line, schema, components, f"{where} line {i + 1}", err)
        else:
            validate(rec["body"], schema, components, where, err)
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            if not partial and method in item and (method, path) not in exercised:
                err(f"{method.upper()} {path}: no successful response recorded (untested)")


def validate(instance, schema, components, where, err):
    full = dict(schema)
    full["components"] = components
    validator = jsonschema.Draft7Validator(full)
    for e in sorted(validator.iter_errors(instance), key=lambda e: list(e.path)):
        loc = "/".join(str(p) for p in e.path) or "(body)"
        err(f"{where}: {loc}: {e.message[:300]}")


def main(argv):
    partial = "--partial" in argv
    argv = [a for a in argv if a != "--partial"]
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    errors, err = fail_list()
    check_structure(doc, err)
    if len(argv) == 3:
        if partial and not glob.glob(os.path.join(argv[2], "*.json")):
            print(f"openapi: no responses recorded in {argv[2]} (no e2e test that talks to "
                  "armhived ran): nothing to check")
            return 0
        check_responses(doc, argv[2], err, partial)
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} problem(s)", file=sys.stderr)
        return 1
    print("openapi: ok" + (f" ({len(glob.glob(os.path.join(argv[2], '*.json')))} responses)"
                           if len(argv) == 3 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
